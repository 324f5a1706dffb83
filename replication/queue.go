package replication

import "sync"

// queue is an unbounded FIFO that producers push to without ever blocking and
// one goroutine drains, all at once, when woken.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newQueue[T any]() *queue[T] { return &queue[T]{wake: make(chan struct{}, 1)} }

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns everything queued, oldest first, and empties the queue.
func (q *queue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// awaitOr runs f, which may block without regard to done, on its own
// goroutine and returns its result, or ok false if done closes first and f
// has not returned by then. An abandoned f ends by itself.
func awaitOr[T any](f func() T, done <-chan struct{}) (v T, ok bool) {
	result := make(chan T, 1)
	go func() { result <- f() }()
	select {
	case v = <-result:
		return v, true
	case <-done:
		select {
		case v = <-result:
			return v, true
		default:
			return v, false
		}
	}
}
