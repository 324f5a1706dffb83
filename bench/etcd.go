package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockserver/lockserver/internal/freeport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// startEtcd starts a 3-member etcd cluster on loopback ports with its data in
// the bench's temporary directory; etcd fsyncs its log by default.
func startEtcd(ctx context.Context, b *bench) (*instance, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, skipError{"etcd is not installed; " + etcdInstall}
	}
	const members = 3
	var clientURLs, peerURLs, cluster []string
	for i := range members {
		c, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		p, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		clientURLs, peerURLs = append(clientURLs, "http://"+c), append(peerURLs, "http://"+p)
		cluster = append(cluster, fmt.Sprintf("e%d=http://%s", i+1, p))
	}
	var procs []*process
	stopAll := func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for i := range members {
		name := fmt.Sprintf("e%d", i+1)
		dir, err := b.tempDir("etcd-" + name)
		if err != nil {
			stopAll()
			return nil, err
		}
		p, err := startProcess(dir, "etcd-"+name, bin,
			"--name", name, "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", clientURLs[i], "--advertise-client-urls", clientURLs[i],
			"--listen-peer-urls", peerURLs[i], "--initial-advertise-peer-urls", peerURLs[i],
			"--initial-cluster", strings.Join(cluster, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "lockserver-bench",
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn")
		if err != nil {
			stopAll()
			return nil, err
		}
		procs = append(procs, p)
	}
	var leader string
	for i, p := range procs {
		err := p.waitReady(ctx, func(ctx context.Context) error {
			l, err := etcdLeader(ctx, clientURLs, clientURLs[i])
			leader = l
			return err
		})
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("etcd cluster: %w", err)
		}
	}
	return &instance{
		etcd: []string{leader},
		cpu:  processesCPU(func() []*process { return procs }),
		stop: stopAll,
	}, nil
}

// etcdLeader asks the member at endpoint for the cluster's leader and returns
// the leader's client URL.
func etcdLeader(ctx context.Context, all []string, endpoint string) (string, error) {
	cli, err := newEtcdClient(all)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return "", fmt.Errorf("etcd status: %w", err)
	}
	if st.Leader == 0 {
		return "", errors.New("etcd has no leader yet")
	}
	for _, ep := range all {
		s, err := cli.Status(ctx, ep)
		if err != nil {
			return "", fmt.Errorf("etcd status: %w", err)
		}
		if s.Header.MemberId == st.Leader {
			return ep, nil
		}
	}
	return "", errors.New("etcd leader is not one of the members started")
}

func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// etcdCycles returns workers that lock and unlock etcd's concurrency.Mutex,
// each with its own session (lease), as separate lock users would. With
// hot > 0 the workers share that many mutexes and the latency recorded is the
// wait to acquire, or with h the hand-off; otherwise each has its own and
// both operations count.
func etcdCycles(ctx context.Context, endpoints []string, prefix string, clients, hot int, h *handoff) ([]stepFunc, func(), error) {
	cli, err := newEtcdClient(endpoints)
	if err != nil {
		return nil, nil, err
	}
	var sessions []*concurrency.Session
	release := func() {
		for _, s := range sessions {
			s.Close()
		}
		cli.Close()
	}
	steps := make([]stepFunc, clients)
	for i := range steps {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(60), concurrency.WithContext(ctx))
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("etcd session: %w", err)
		}
		sessions = append(sessions, s)
		name := fmt.Sprintf("/%s/lock/%d", prefix, i)
		if hot > 0 {
			name = fmt.Sprintf("/%s/hot/%d", prefix, i%hot)
		}
		mu := concurrency.NewMutex(s, name)
		steps[i] = func(ctx context.Context, m *meter) error {
			start := time.Now()
			if err := mu.Lock(ctx); err != nil {
				return fmt.Errorf("etcd mutex lock: %w", err)
			}
			if h != nil {
				h.acquired(m, i)
				h.releasing(i)
			} else {
				m.observe(start)
			}
			start = time.Now()
			// The release must happen even when the run ends meanwhile, or
			// the next holder would wait for the session's lease.
			if err := mu.Unlock(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("etcd mutex unlock: %w", err)
			}
			if hot == 0 && h == nil {
				m.observe(start)
			}
			return nil
		}
	}
	return steps, release, nil
}
