package lockserver_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lockserver/lockserver"
	"github.com/redis/go-redis/v9"
)

// Open a server inside the process and reach it over loopback TCP, as any Redis
// client would.
func Example() {
	srv, err := lockserver.Open(lockserver.Options{}) // a free loopback port
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	ok, _ := rdb.SetNX(ctx, "lock:orders", "owner-1", 30*time.Second).Result()
	fmt.Println("first acquire:", ok)
	ok, _ = rdb.SetNX(ctx, "lock:orders", "owner-2", 30*time.Second).Result()
	fmt.Println("second acquire:", ok)
	// Output:
	// first acquire: true
	// second acquire: false
}

// Reach the server with no socket at all: go-redis dials through an in-memory pipe.
func ExampleServer_Dialer() {
	srv, err := lockserver.Open(lockserver.Options{Addr: "-"}) // no TCP listener
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Dialer: srv.Dialer()})
	defer rdb.Close()

	unlock := redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)
	rdb.Set(ctx, "lock", "token-1", time.Minute)
	fmt.Println(unlock.Run(ctx, rdb, []string{"lock"}, "token-2").Val())
	fmt.Println(unlock.Run(ctx, rdb, []string{"lock"}, "token-1").Val())
	// Output:
	// 0
	// 1
}

// Run commands by direct call: no connection and no RESP.
func ExampleServer_Do() {
	srv, err := lockserver.Open(lockserver.Options{Addr: "-"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	fmt.Println(srv.Do(ctx, "SET", "lock", "owner-1", "NX", "PX", 30000))
	fmt.Println(srv.Do(ctx, "SET", "lock", "owner-2", "NX", "PX", 30000))
	fmt.Println(srv.Do(ctx, "GET", "lock"))
	fmt.Println(srv.Do(ctx, "HINCRBY", "lock", "x", 1))
	// Output:
	// OK <nil>
	// <nil> lockserver: nil
	// owner-1 <nil>
	// <nil> WRONGTYPE Operation against a key holding the wrong kind of value
}
