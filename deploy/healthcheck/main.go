// Command healthcheck asks one of a lockserver's HTTP endpoints (/readyz,
// /healthz) and exits 0 when it answers 200 OK, else 1 with the reason on
// stderr: a container health check for an image that has neither a shell
// nor curl (deploy/Dockerfile, deploy/compose/compose.yaml).
//
//	healthcheck http://127.0.0.1:9121/readyz
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck URL")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

func check(url string) error {
	// Shorter than any health check's own timeout, so that the reason is
	// printed rather than the process killed.
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
