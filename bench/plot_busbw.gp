# busbw against message size for every row of `dtw_bench_collectives --plot`.
# Called as: gnuplot -e "datafile='x.dat'; outfile='x.svg'; nseries=N; plottitle='...'" plot_busbw.gp
# The data file holds one block per series (blocks separated by two blank
# lines), each starting with a header line whose first field is the series name.
if (!exists("datafile")) datafile = 'collectives.dat'
if (!exists("outfile")) outfile = 'collectives.svg'
if (!exists("nseries")) nseries = 1
if (!exists("plottitle")) plottitle = ''

set terminal svg size 960,600 dynamic background rgb 'white' font 'sans,12'
set output outfile
set title 'allreduce bus bandwidth, '.plottitle
set xlabel 'message size per rank (bytes)'
set ylabel 'busbw (GB/s)'
set logscale x 2
set format x '%.0b%B'
set grid xtics ytics
set key top left
set yrange [0:*]
plot for [i=0:nseries-1] datafile index i using 1:2 with linespoints lw 2 pt 7 ps 0.6 title columnheader(1)
