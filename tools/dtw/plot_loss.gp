# The loss curve of `dtw train`.
# Called as: gnuplot -e "datafile='x.csv'; outfile='x.svg'; plottitle='...'" plot_loss.gp
if (!exists("datafile")) datafile = 'train.csv'
if (!exists("outfile")) outfile = 'train.svg'
if (!exists("plottitle")) plottitle = ''

set terminal svg size 960,600 dynamic background rgb 'white' font 'sans,12'
set output outfile
set datafile separator ','
set title 'training loss, '.plottitle
set xlabel 'step'
set ylabel 'cross-entropy loss (nats)'
set grid xtics ytics
set key top right
set yrange [0:*]
plot datafile using 1:2 skip 1 with lines lw 2 title 'loss'
