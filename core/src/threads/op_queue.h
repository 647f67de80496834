#pragma once
// The unmatched sends or receives of one rank, found by (context, source, tag)
// in the order they were posted: MPI's matching rule, that two messages with
// the same source and tag arrive in the order they were sent, is this FIFO.
//
// A small hash table of intrusive lists (each Op carries its own link), so
// that posting and matching allocate nothing: a map of deques allocated a node
// and a deque block for every message that had to wait for its partner, which
// at a thousand ranks was a good part of what an exchange cost. The queue does
// not own its ops: a queued op is pending, and its rank's `owned` list keeps
// it alive until it is done (and it leaves the queue before that).
//
// A template only so that threads_world.h can hold it before Op is complete:
// Op is a node with members `Key queued_key` and `Op* next_queued`, and a Key
// is comparable and has `hash()`.
#include <cstddef>
#include <vector>

namespace dtw::threads {

template <class Op, class Key>
class OpQueue {
 public:
  // Appends `op`, to be found by `key`.
  void push(Op* op, const Key& key) {
    if (count_ >= 2 * buckets_.size()) grow();
    op->queued_key = key;
    append(bucket(key), op);
    ++count_;
  }

  // Takes out and returns the earliest op pushed with `key`, or nullptr.
  Op* pop(const Key& key) {
    Bucket& b = bucket(key);
    Op* prev = nullptr;
    for (Op* op = b.head; op != nullptr; prev = op, op = op->next_queued) {
      if (op->queued_key == key) {
        unlink(b, prev, op);
        return op;
      }
    }
    return nullptr;
  }

  // Takes `op` out if it is queued here; says whether it was.
  bool remove(const Op* op) {
    Bucket& b = bucket(op->queued_key);
    Op* prev = nullptr;
    for (Op* at = b.head; at != nullptr; prev = at, at = at->next_queued) {
      if (at == op) {
        unlink(b, prev, at);
        return true;
      }
    }
    return false;
  }

 private:
  struct Bucket {
    Op* head = nullptr;
    Op* tail = nullptr;
  };

  Bucket& bucket(const Key& key) {
    if (buckets_.empty()) buckets_.resize(kFirstBuckets);
    return buckets_[key.hash() & (buckets_.size() - 1)];
  }

  static void append(Bucket& b, Op* op) {
    op->next_queued = nullptr;
    if (b.tail) b.tail->next_queued = op;
    else b.head = op;
    b.tail = op;
  }

  void unlink(Bucket& b, Op* prev, Op* op) {
    (prev ? prev->next_queued : b.head) = op->next_queued;
    if (b.tail == op) b.tail = prev;
    op->next_queued = nullptr;
    --count_;
  }

  // Four times the buckets; each old bucket is walked head to tail, so the ops
  // of one key keep their order.
  void grow() {
    std::vector<Bucket> old = std::move(buckets_);
    buckets_.assign(old.empty() ? kFirstBuckets : old.size() * 4, Bucket{});
    for (Bucket& b : old) {
      for (Op* op = b.head; op != nullptr;) {
        Op* next = op->next_queued;
        append(bucket(op->queued_key), op);
        op = next;
      }
    }
  }

  static constexpr std::size_t kFirstBuckets = 8;  // a power of two
  std::vector<Bucket> buckets_;
  std::size_t count_ = 0;
};

}  // namespace dtw::threads
