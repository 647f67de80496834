// The built-in corpus: plain English about the ideas dtw teaches, written for
// dtw, so a character model has something meaningful and license-free to
// learn. Printable ASCII and newlines only (encode() accepts nothing else).
// Several raw literals, concatenated, keep each piece easy to edit.
#include "dtw/model/data.h"

namespace dtw::model {
namespace {

constexpr char kCorpus[] =
    R"corpus(Training a large model on one device is slow, and sometimes it is impossible.
The model may not fit in the memory of a single accelerator, or one pass over
the data may take months. Distributed training splits the work across many
devices so that they finish together what none of them could finish alone.
This text explains the main ideas in plain words. It is meant to be read
slowly, and it is also the text that a small language model in this workbench
learns to imitate, one character at a time.

Ranks and processes

A distributed program starts the same code many times. Each copy is called a
rank, and each rank knows two numbers: its own rank, from zero up, and the
world size, which is how many ranks there are. Rank zero is not special by
nature, but programs often give it small extra jobs, such as printing the
loss or writing a checkpoint. Everything else about the ranks is symmetric:
they run the same instructions on different pieces of data.

A rank may be a process on its own machine, a process that shares a machine
with others, or a thread inside one process. The program should not care.
What matters is that ranks do not share memory. If rank two wants a number
that rank five computed, rank five has to send it, and rank two has to
receive it. All cooperation between ranks is built out of such messages.

When you read a distributed program, read it once from the point of view of
a single rank. Ask what this rank holds, what it sends, and what it expects
to receive. Then read it again and check that every send has a matching
receive on the other side. Most bugs in distributed code are a send with no
receive, a receive with no send, or two ranks that wait for each other.

Messages

A message has a source, a destination, a tag and a body. The tag lets a
receiver tell apart two messages from the same sender. The body is a buffer
of numbers with a known type and a known count. A receive names the source
and the tag it wants, and it also says how much room it has. If the message
is larger than the room, that is an error, and a good library says so
clearly instead of writing past the end of the buffer.

A send can be blocking or non-blocking. A blocking send returns when the
buffer may be reused; a non-blocking send returns at once and hands back a
request that the program must later wait on. Non-blocking calls let a rank
post a receive before it sends, which avoids the most common deadlock: two
ranks that both send first and both wait for the other to receive.

A deadlock is not a crash. The program simply stops making progress, and
nothing is printed. For that reason a teaching runtime watches the ranks,
and when every live rank is blocked on a peer that is also blocked, it
reports who waits for whom. That graph of waits usually points straight at
the mistake.

The cost of a message can be described with two numbers. The latency, often
called alpha, is the fixed time to send anything at all. The bandwidth cost,
often called beta, is the time per byte. A message of n bytes costs about
alpha plus n times beta. Small messages are dominated by latency, large ones
by bandwidth, and many design choices in distributed training come from
moving work from one side of that sum to the other.

Collectives

Some patterns of communication are so common that they have names. They are
called collectives because every rank in a group takes part, and every rank
must call the same collective with matching arguments.

In a broadcast, one rank, the root, has a buffer and every other rank ends
up with a copy of it. In a reduce, every rank has a buffer and the root ends
up with their element-wise sum, or their maximum, or another associative
operation. In a gather, the root collects one piece from every rank, in rank
order. In a scatter, the root hands out one piece to each rank.

Three collectives matter most for training. An all-reduce is a reduce whose
result lands on every rank, not only on the root. An all-gather is a gather
whose result lands on every rank. A reduce-scatter reduces the buffers and
then leaves each rank with only its own slice of the result. An all-reduce
is exactly a reduce-scatter followed by an all-gather, and that identity is
behind several of the algorithms below.

The simplest all-reduce sends everything to rank zero, adds it up, and sends
the answer back. It is correct, but rank zero does all the work and its link
carries all the traffic. A ring all-reduce does better. The ranks stand in a
circle, and the buffer is cut into as many chunks as there are ranks. In the
first phase, each rank passes one chunk to its right-hand neighbour and adds
the chunk that arrives from its left, again and again, until each rank holds
one chunk that is fully reduced. In the second phase, the ranks pass the
finished chunks around the ring until everyone has all of them. Each rank
sends and receives about twice the size of the buffer in total, no matter how
many ranks there are. That is why the ring is said to be bandwidth optimal.

The ring has a weakness: it takes a number of steps that grows with the
number of ranks, and each step pays the latency once. For small buffers a
tree, or recursive doubling, where ranks exchange with partners at distance
one, then two, then four, finishes in a number of steps that grows only with
the logarithm of the world size. Real libraries pick the algorithm by the
size of the message and by the shape of the network.

When you measure a collective, report two kinds of bandwidth. The algorithm
bandwidth is the size of the buffer divided by the time. The bus bandwidth
multiplies that by a factor that depends on the collective, so that numbers
for different world sizes can be compared with the speed of the hardware
link. For an all-reduce the factor is two times the world size minus one,
divided by the world size.

Floating point addition is not associative. If two algorithms add the same
numbers in a different order, their answers may differ in the last bits.
Neither answer is wrong, but a test that compares them must allow for that,
or must fix the order of the additions so that the results agree bit for
bit.
)corpus"
    R"corpus(
Data parallelism

The most common way to train on many devices is data parallelism. Every rank
holds a full copy of the model. The global batch of examples is split into
equal shards, one per rank. Each rank runs the forward and backward pass on
its own shard and gets gradients for every parameter. The ranks then average
their gradients with an all-reduce, and every rank takes the same optimizer
step. Because they started with the same weights and applied the same
update, they still hold the same weights afterwards.

It helps to check this claim with a small experiment. Train a model on one
device with a batch of twelve examples. Then train it on three ranks with
four examples each, taking care that the three shards together are exactly
the twelve examples of the single run. If the loss is the mean over the
batch, the averaged gradients are the same as the single-device gradients,
up to the order of the floating point additions. The two runs should print
the same losses, step after step, to many digits.

For this to hold, the data must be chosen in a way that does not depend on
the number of ranks. A good rule is that example g of step s is a pure
function of the seed, the step and g. Rank r of D ranks then takes examples
r times B over D up to r plus one times B over D. Any other scheme, such as
letting each rank draw from its own random generator, makes the multi-rank
run train on different data, and then no comparison is possible.

Data parallelism scales the batch. If one rank handles a batch of sixteen
and there are sixty-four ranks, the global batch is one thousand and
twenty-four. Larger batches give smoother gradients but fewer steps per pass
over the data, so the learning rate and its warmup usually have to change
when the number of ranks changes.

The all-reduce of the gradients costs time. A simple program waits until the
backward pass is finished and then reduces everything at once. A better
program notices that the gradients of the last layers are ready first, and
starts reducing them while the backward pass is still working on the earlier
layers. Grouping many small gradients into larger buckets makes each
message cheaper, since every message pays the latency once. Overlapping
communication with computation in this way can hide most of the cost.

Gradient accumulation is the opposite trick. If a batch does not fit in
memory, a rank can run several small micro-batches, add up their gradients,
and only then communicate and step. The result is the same as one large
batch, as long as the loss is scaled correctly.

Tensor parallelism

Sometimes a single layer is too big for one device. Tensor parallelism
splits the weight matrices of a layer across ranks, so that each rank holds
and multiplies only a part of them.

Consider a layer that computes y equals x times A. If A is split by columns,
each rank computes some of the columns of y from the full input x. No
communication is needed until someone needs the whole of y. If A is split
by rows instead, each rank needs only a slice of x, and each rank produces a
partial sum of the whole y; an all-reduce adds the partial sums.

The feed-forward block of a transformer pairs these two splits. The first
matrix is split by columns, the nonlinearity is applied to each rank's
columns independently, and the second matrix is split by rows. The block
then needs a single all-reduce in the forward pass and a single one in the
backward pass. Attention can be split the same way, by giving each rank a
subset of the heads.

Tensor parallelism communicates inside every layer, on every step, so it
needs a fast link between the ranks that share a layer. It is usually kept
within one machine, where the devices are connected directly, while data
parallelism runs across machines.

Pipeline parallelism

Pipeline parallelism splits the model by depth. The first few layers live on
the first rank, the next few on the second, and so on. Each rank is called a
stage. The output of one stage is sent to the next as a message, and during
the backward pass the gradient travels back the other way.

If the whole batch went through the stages in one piece, only one stage would
be busy at a time and the others would wait. To keep them busy, the batch is
cut into micro-batches. While stage two works on the first micro-batch,
stage one can already start the second. The idle time at the start and at
the end of each step is called the bubble. With p stages and m
micro-batches, the bubble is about p minus one out of m plus p minus one of
the time, so more micro-batches make the bubble smaller.

Schedules differ in the order in which forward and backward passes are run.
In the simplest one, every stage first runs all forward passes and then all
backward passes, which means it must keep the activations of every
micro-batch in memory. The one forward, one backward schedule starts the
backward pass of a micro-batch as soon as it can, so each stage holds only a
few micro-batches at once. The bubble is the same, but the memory is much
smaller.

Pipeline stages only talk to their neighbours, and they send activations,
which are much smaller than the weights. That is why pipelines can run over
slower links than tensor parallelism. The price is the bubble, and a more
complicated program.
)corpus"
    R"corpus(
ZeRO and sharded state

In plain data parallelism every rank stores everything: the parameters, the
gradients and the optimizer state. With Adam the optimizer keeps two extra
numbers per parameter, the running mean of the gradient and the running mean
of its square. In mixed precision training there is often also a full
precision copy of the weights. The optimizer state can then take several
times more memory than the model itself, and every rank holds an identical
copy of it. That is a waste.

ZeRO removes the waste in three stages. In the first stage, each rank keeps
the optimizer state for only its own slice of the parameters. After the
gradients are averaged, each rank updates only its slice, and an all-gather
then shares the updated parameters with everyone. In the second stage, the
gradients are also sharded: instead of an all-reduce, a reduce-scatter leaves
each rank with the averaged gradient of just its own slice, which is all it
needs for its update. In the third stage, even the parameters are sharded,
and each layer gathers its full weights just before it is used and frees
them right afterwards.

Notice that a reduce-scatter followed by an all-gather moves the same amount
of data as one all-reduce. The first two stages of ZeRO therefore cost about
the same communication as plain data parallelism while cutting the memory
for the optimizer state by the number of ranks. The third stage adds more
communication, because the weights are gathered in the forward pass and
again in the backward pass, but it lets a model train even when its
parameters do not fit on one device.

A careful test for ZeRO is the same as for data parallelism: the sharded run
must produce the same weights as an unsharded run after every step. Because
each element of the update depends only on the same element of the
gradient and of the state, sharding does not change the arithmetic, and the
two runs can agree bit for bit.

Optimizers

Stochastic gradient descent moves every parameter a small step against its
gradient. The size of the step is the learning rate. Momentum keeps a
running velocity, a decaying sum of past gradients, and moves the parameter
along the velocity instead of the raw gradient. This smooths out noise and
speeds up progress along directions where the gradient keeps the same sign.

Adam keeps two running averages for every parameter: the mean of the
gradient and the mean of its square. It divides the first by the square root
of the second, so each parameter gets a step size scaled to the size of its
own gradients. Because both averages start at zero, they are too small in
the first steps, and Adam corrects them by dividing by one minus the decay
rate raised to the step number.

Weight decay pulls every weight a little towards zero at each step. In plain
gradient descent this is the same as adding a penalty on the squared weights
to the loss. In Adam it is not, because the penalty's gradient would be
divided by the running scale like any other gradient. AdamW therefore
applies the decay directly to the weights, outside the adaptive scaling.
This is called decoupled weight decay.

Gradient clipping protects training from a single bad step. The gradient of
all parameters together is treated as one long vector. If its length is
larger than a chosen limit, the whole vector is scaled down to that length.
In a sharded run, each rank computes the sum of squares of its own part, an
all-reduce adds the sums, and the square root gives the global length. Every
rank then scales its part by the same factor.
)corpus"
    R"corpus(
Attention

A transformer reads a sequence of tokens. Each token is first turned into a
vector by looking it up in an embedding table, and a position embedding is
added so that the model knows where in the sequence each token sits.

Attention lets every position look at the others. Each position produces a
query, a key and a value, by three matrix products. The score between
position i and position j is the dot product of the query of i and the key
of j, divided by the square root of the key size so that the scores do not
grow with the width of the model. A softmax turns the scores of each row
into weights that are positive and sum to one, and the output of position i
is the weighted sum of the values.

A language model must not peek at the future. When it predicts the next
character, position i may only look at positions up to i. This is done with
a causal mask: the scores of later positions are set to minus infinity
before the softmax, so their weights become zero.

Several attention heads run side by side, each with its own smaller queries,
keys and values, and their outputs are joined and mixed by one more matrix.
Different heads can learn to follow different patterns, such as the previous
character, the start of the current word, or a matching bracket.

The scores form a square matrix whose side is the sequence length, so the
memory for attention grows with the square of the length. Blockwise
attention avoids storing that matrix. It walks over the keys in blocks and
keeps, for each query, a running maximum, a running sum of exponentials, and
a running weighted sum of values. When a new block raises the maximum, the
old sums are rescaled. At the end the weighted sum is divided by the sum of
exponentials. The result is the same as ordinary attention, up to rounding,
but the memory grows only linearly with the length.

Blockwise attention is also the key to splitting long sequences across
ranks. If each rank holds a block of the keys and values, the ranks can pass
those blocks around a ring while each one updates its running sums for its
own queries. This is sometimes called ring attention, and it reuses exactly
the message pattern of the ring all-reduce.

A transformer block combines attention with a feed-forward network of two
matrix products and a nonlinearity between them. Each part is wrapped with a
layer normalization before it and a residual connection around it, so the
input of the part is added back to its output. The residual path lets
gradients flow straight through many layers, which makes deep models
trainable.

The loss

The model's last layer produces one score for every token of the
vocabulary, at every position. A softmax turns the scores into
probabilities, and the loss is the negative log of the probability given to
the correct next token, averaged over all positions. A model that knows
nothing gives every token the same probability, and its loss is the natural
log of the vocabulary size. A model that predicts perfectly has a loss of
zero. Watching the loss fall from the first value towards the second is the
simplest sign that training works.

The softmax and the loss are computed together for a good reason. The
exponential of a large score overflows, so the largest score of each row is
subtracted first, which changes nothing mathematically. The gradient of the
loss with respect to the scores is then simply the probabilities minus one
at the correct token, divided by the number of positions.

Checking gradients

Every layer in this workbench has a hand-written backward pass, and every
backward pass is checked against finite differences. The idea is to nudge
one input up by a tiny amount, run the forward pass, nudge it down, run it
again, and divide the change in the loss by twice the nudge. In double
precision this agrees with the analytic gradient to many digits. A wrong
index or a forgotten term shows up as an error of order one, so the check
finds real bugs, not rounding.

Reproducibility

Every random number in a good teaching run is a function of what it is for.
The initial value of weight k of the tensor named w comes from a hash of the
seed, the name and k, not from the next draw of a generator. The same holds
for the data. Because of this, a model split across ranks in any way starts
from exactly the weights of the whole model on one device, and sees exactly
the same examples. A difference between two runs then always means a
difference in the arithmetic, never in the luck of the draw.
)corpus"
    R"corpus(
A ring all-reduce, step by step

Take three ranks, and let each hold a buffer of three numbers. Rank zero
holds 1, 2, 3. Rank one holds 10, 20, 30. Rank two holds 100, 200, 300. The
sum that everyone should end up with is 111, 222, 333. Cut each buffer into
three chunks of one number each.

In the first step of the reduce-scatter phase, rank zero sends its chunk zero
to rank one, rank one sends its chunk one to rank two, and rank two sends
its chunk two to rank zero. Each receiver adds what arrives to its own copy
of that chunk. Rank one now has 11 in chunk zero, rank two has 220 in chunk
one, and rank zero has 303 in chunk two.

In the second step, each rank passes on the chunk it has just added to. Rank
one sends 11 to rank two, which adds its 100 and holds 111 in chunk zero.
Rank two sends 220 to rank zero, which adds its 2 and holds 222 in chunk
one. Rank zero sends 303 to rank one, which adds its 30 and holds 333 in
chunk two. After two steps, that is, the world size minus one, every rank
owns one chunk of the final sum.

The all-gather phase takes two more steps. Each rank sends its finished
chunk to the right, and each receiver passes the chunk it received to the
right once more. At the end every rank holds 111, 222, 333. Every rank sent
four numbers and received four numbers, which is two times the world size
minus one, divided by the world size, times the buffer length. With a
thousand ranks the factor is still just under two.

Mixed precision

Modern accelerators multiply half precision numbers much faster than single
precision ones, and half precision tensors take half the memory and half the
bandwidth. Mixed precision training runs the matrix products in a sixteen
bit format while keeping a master copy of the weights, and often the
accumulations, in thirty-two bits.

Two sixteen bit formats are common. One keeps more bits for the fraction
and fewer for the exponent, so it is precise but overflows and underflows
easily; training with it needs loss scaling, where the loss is multiplied
by a large factor before the backward pass so that small gradients do not
round to zero, and the gradients are divided by the same factor before the
step. The other keeps the exponent range of single precision and fewer
fraction bits, so it rarely needs loss scaling but is less precise.

Precision matters for communication too. Reducing gradients in a sixteen
bit format halves the traffic of the all-reduce, but the sum of many small
numbers can lose bits. Some systems send in low precision and add in high
precision on arrival, which keeps most of the saving and most of the
accuracy.

Memory

It is worth counting where the memory of a training run goes. The
parameters take one number each. The gradients take one more. Adam adds
two. A master copy in single precision adds one more when the model runs in
half precision. On top of that come the activations: every layer keeps the
inputs that its backward pass will need, for every example of the batch and
every position of the sequence. For long sequences and large batches the
activations are often the largest item of all.

Activation recomputation trades time for that memory. Instead of keeping
every activation, a layer keeps only its input and runs its forward pass a
second time during the backward pass. The extra forward pass costs about a
third more compute, but the saved memory can allow a larger batch or a
larger model, which often wins overall.

Once the memory is counted, the parallel strategies fall into place. Data
parallelism shares nothing, so it saves no memory. ZeRO shares the optimizer
state, the gradients and the parameters. Tensor parallelism shares the
weights and the activations inside a layer. Pipeline parallelism shares the
layers. Large runs combine several of them: tensor parallelism inside a
machine, pipeline parallelism across a few machines, and data parallelism
with ZeRO across all the rest. This combination is often called three
dimensional parallelism, and each rank then belongs to three groups, one
for each kind of communication.

Groups and communicators

A collective does not always involve every rank. In a run with tensor and
data parallelism, the ranks that share a layer must all-reduce their
partial sums among themselves, while the ranks that hold the same part of
the model must average their gradients among themselves. Each of these sets
is a group, and a communicator is the handle through which a rank talks to
one group. Splitting the world into groups is done by giving each rank a
color: ranks with the same color end up in the same new communicator, and
their new rank numbers follow their old order.

Getting the groups right is half of getting hybrid parallelism right. A
useful check is to print, for every rank, its position in each dimension
and the members of each of its groups, and to make sure that every group
has the expected size and that the groups of one kind cover the world
exactly once.

Learning rate schedules

Training usually starts with a warmup, in which the learning rate grows
from nearly zero to its peak over the first few hundred steps. Early
gradients are large and noisy, and the running averages of Adam are not yet
reliable, so small steps at first keep the model from being thrown far off
course. After the warmup the rate decays, often along a cosine curve,
towards a small final value. When the global batch grows with the number
of ranks, the peak rate is usually raised as well, and the warmup becomes
more important.

Characters as tokens

The small language model in this workbench reads characters, not words.
Each printable character and the newline gets its own number, so the whole
vocabulary has fewer than a hundred entries. The model sees a window of the
text and, at every position, predicts the next character. At first it
guesses every character with equal chance. Soon it learns that spaces and
the letter e are common, then that a q is followed by a u, then whole
common words, and finally something like the rhythm of these sentences. A
text that explains its own training is a fitting thing for it to learn.

When a distributed run and a single-device run disagree, the first step to
look at is the first step at which they disagree. Compare the losses, then
the gradients of each tensor, then the gradients of each rank. The tensor
whose gradient differs first is usually the one whose communication is
wrong: a missing all-reduce, a sum where a mean was needed, or a slice taken
at the wrong offset.

Failures

On many machines, something eventually fails. A rank may crash, a link may
drop, or a process may hang. A robust training program writes checkpoints,
so that it can restart from the last one. A robust runtime notices when a
rank has died and stops the others, instead of letting them wait forever.
Clear error messages matter here more than anywhere else: a message that
says which rank failed, in which call, with which arguments, saves hours.

A few habits help in every distributed program. Give every message a tag
that says what it is. Check that sizes agree before sending, not after
receiving. Test with one rank, with two, and with an odd number of ranks
that does not divide the data evenly. Test with a size of zero and a size
of one. Compare every result against a simple version that runs on one
device. Most of all, keep the single-device version around: it is the
standard against which every clever idea is measured.

Closing

Distributed training can look like a large and complicated field, but it
rests on a small set of ideas. Ranks exchange messages. Messages combine
into collectives. Collectives let ranks share gradients, weights and
activations. Data parallelism splits the batch, tensor parallelism splits
the layers, pipeline parallelism splits the depth, and ZeRO splits the
state. Each of these can be checked against one device, one step at a time.
Read the code one rank at a time, match every send with its receive, and
measure before you optimize.
)corpus";

}  // namespace

std::string_view corpus_text() {
  return {kCorpus, sizeof(kCorpus) - 1};
}

}  // namespace dtw::model
