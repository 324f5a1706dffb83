"""Drive redis-py's Lock (Debian's python3-redis) the way its users do.

Usage: redispy_lock.py HOST PORT [PASSWORD]

With REDISPY_SSL_CA, REDISPY_SSL_CERT and REDISPY_SSL_KEY set, it connects
over TLS (ssl=True) with that CA and client certificate.

Prints one line per step, with nothing that depends on timing or on
random tokens, so that the output against redis-server and against
lockserver can be compared line by line by compat_test/client_redispy_test.go.
"""

import os
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError  # noqa: F401 (named in the output)


def out(label, value):
    print(f"{label}: {value}", flush=True)


def outcome(fn):
    """The value fn returns, or the name of the exception it raises."""
    try:
        return repr(fn())
    except Exception as e:  # the exception's class is the outcome
        return type(e).__name__


def ttl_within(r, name, low_ms, high_ms):
    return low_ms < r.pttl(name) <= high_ms


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    password = sys.argv[3] if len(sys.argv) > 3 else None
    tls = {}
    if os.environ.get("REDISPY_SSL_CA"):
        tls = dict(ssl=True, ssl_ca_certs=os.environ["REDISPY_SSL_CA"],
                   ssl_certfile=os.environ["REDISPY_SSL_CERT"], ssl_keyfile=os.environ["REDISPY_SSL_KEY"])
    r = redis.Redis(host=host, port=port, password=password, **tls)
    r.delete("py:a", "py:b", "py:ctx", "py:shared", "py:contend")
    # With an empty script cache, every Lock script goes EVALSHA, NOSCRIPT,
    # SCRIPT LOAD, EVALSHA.
    out("script flush", r.script_flush())

    lock = r.lock("py:a", timeout=5)
    out("acquire, not blocking", lock.acquire(blocking=False))
    out("owned", lock.owned())
    out("ttl within the timeout", ttl_within(r, "py:a", 4000, 5000))
    rival = r.lock("py:a", timeout=5)
    out("rival acquire, not blocking", rival.acquire(blocking=False))
    out("rival acquire, blocking_timeout 0.3 s", rival.acquire(blocking_timeout=0.3))
    out("rival owned", rival.owned())
    out("rival sees it locked", rival.locked())

    out("extend by 10 s", lock.extend(10))
    out("ttl within 10-15 s", ttl_within(r, "py:a", 10000, 15000))
    out("extend, replacing the ttl with 2 s", lock.extend(2, replace_ttl=True))
    out("ttl within 1-2 s", ttl_within(r, "py:a", 1000, 2000))
    out("reacquire", lock.reacquire())
    out("ttl back within the timeout", ttl_within(r, "py:a", 4000, 5000))

    # Another token: not the owner.
    rival.local.token = b"not-the-owner"
    out("release by a non-owner", outcome(rival.release))
    rival.local.token = b"not-the-owner"
    out("extend by a non-owner", outcome(lambda: rival.extend(1)))
    out("reacquire by a non-owner", outcome(rival.reacquire))
    out("still owned by the holder", lock.owned())

    # Tokens are thread-local: another thread holds no token of this lock
    # (redis-py 4.3 leaves the attribute unset there, so using it raises
    # AttributeError rather than seeing the holder's token).
    seen = {}

    def other_thread():
        seen["owned"] = outcome(lock.owned)
        seen["release"] = outcome(lock.release)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    out("another thread: owned", seen["owned"])
    out("another thread: release", seen["release"])
    out("release by the holder", outcome(lock.release))
    out("release again", outcome(lock.release))
    out("locked after release", lock.locked())

    # Without thread-local storage, another thread may release.
    shared = r.lock("py:shared", timeout=5, thread_local=False)
    out("shared acquire", shared.acquire())

    def release_shared():
        seen["shared"] = outcome(shared.release)

    t = threading.Thread(target=release_shared)
    t.start()
    t.join()
    out("shared released by another thread", seen["shared"])

    # A lease that runs out: a blocked acquirer gets the lock, and the old
    # holder finds it no longer owns it.
    short = r.lock("py:b", timeout=0.3)
    out("acquire with a 0.3 s timeout", short.acquire())
    waiter = r.lock("py:b", timeout=5, sleep=0.02)
    out("blocking acquire outlasts the lease", waiter.acquire(blocking_timeout=5))
    out("expired holder: extend", outcome(lambda: short.extend(1)))
    out("expired holder: reacquire", outcome(short.reacquire))
    out("expired holder: release", outcome(short.release))
    out("new holder owns it", waiter.owned())
    out("new holder release", outcome(waiter.release))

    with r.lock("py:ctx", timeout=5) as held:
        out("inside with: owned", held.owned())
    out("after with: locked", r.lock("py:ctx").locked())

    # Threads contending for one Lock object, each with its own token.
    contended = r.lock("py:contend", timeout=5, sleep=0.002)
    mu = threading.Lock()
    state = {"inside": 0, "max": 0, "entered": 0}

    def contender():
        for _ in range(10):
            contended.acquire()
            with mu:
                state["inside"] += 1
                state["max"] = max(state["max"], state["inside"])
                state["entered"] += 1
            time.sleep(0.001)
            with mu:
                state["inside"] -= 1
            contended.release()

    threads = [threading.Thread(target=contender) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out("contention", f"{state['entered']} entries, at most {state['max']} inside at once")


if __name__ == "__main__":
    main()
