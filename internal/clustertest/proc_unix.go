//go:build unix

package clustertest

import "syscall"

// Pause stops the process with SIGSTOP, if it runs, until Resume: a process
// frozen by a long GC, a VM migration or a swap storm, whose sockets stay
// open. A paused process does not answer Status.
func (p *Proc) Pause() { p.signalPaused(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() { p.signalPaused(syscall.SIGCONT, false) }

// signalPaused sends sig to the running process if it is not yet paused as
// wanted, and records that it now is.
func (p *Proc) signalPaused(sig syscall.Signal, paused bool) {
	r := p.running()
	if r == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.paused != paused {
		r.cmd.Process.Signal(sig)
		r.paused = paused
	}
}
