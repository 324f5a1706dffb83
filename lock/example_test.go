package lock_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/lockserver/lockserver/lock"
)

// fencedStore is a resource that a lock guards: it remembers the highest
// fencing token it has seen and refuses writes that carry a lower one.
type fencedStore struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

func (s *fencedStore) Write(token uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("token %d is below %d, which the store has seen", token, s.highest)
	}
	s.highest, s.value = token, value
	return nil
}

// Two holders of one lock write to a fenced store. The first pauses (a long
// GC pause, a stalled VM) past its lease; the second takes the lock and
// writes; when the first wakes up and writes, the store refuses it, because
// its token is older than one the store has seen.
func Example_fencedStore() {
	srv, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	b := lock.Embedded(srv, "")
	defer b.Close()
	ctx := context.Background()
	store := &fencedStore{}

	first := lock.NewMutex(b, "report", nil)
	if err := first.LockFor(ctx, 300*time.Millisecond); err != nil {
		panic(err)
	}
	token := first.Token()
	<-first.Lost() // the first holder pauses until its lease has run out

	second := lock.NewMutex(b, "report", nil)
	if err := second.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("second holder writes:", store.Write(second.Token(), "from the second holder"))
	second.Unlock(ctx)

	fmt.Println("first holder writes after its pause:", store.Write(token, "from the first holder"))
	fmt.Println("the store holds:", store.value)
	// Output:
	// second holder writes: <nil>
	// first holder writes after its pause: token 1 is below 2, which the store has seen
	// the store holds: from the second holder
}
