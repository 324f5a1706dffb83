package keyspace

// list is a Redis list: a deque of strings kept contiguous in buf[off:], with
// room before off for pushes at the head and append's room after for pushes
// at the tail. Redisson's fair lock uses lists as short queues.
type list struct {
	buf []string
	off int
}

// items returns the elements, head first. The slice aliases the list.
func (l *list) items() []string { return l.buf[l.off:] }

func (l *list) len() int { return len(l.buf) - l.off }

// pushBack appends s at the tail.
func (l *list) pushBack(s string) {
	if len(l.buf) == cap(l.buf) && l.off > l.len() {
		// Mostly dead room at the head: slide the elements down rather than grow.
		n := copy(l.buf, l.items())
		clear(l.buf[n:])
		l.buf, l.off = l.buf[:n], 0
	}
	l.buf = append(l.buf, s)
}

// pushFront inserts s at the head.
func (l *list) pushFront(s string) {
	if l.off == 0 {
		n := l.len()
		room := n + 4
		nb := make([]string, room+n, room+2*n+4)
		copy(nb[room:], l.items())
		l.buf, l.off = nb, room
	}
	l.off--
	l.buf[l.off] = s
}

// popFront removes and returns the head; the list must not be empty.
func (l *list) popFront() string {
	s := l.buf[l.off]
	l.buf[l.off] = ""
	l.off++
	if l.off == len(l.buf) {
		l.buf, l.off = l.buf[:0], 0
	}
	return s
}

// popBack removes and returns the tail; the list must not be empty.
func (l *list) popBack() string {
	last := len(l.buf) - 1
	s := l.buf[last]
	l.buf[last] = ""
	l.buf = l.buf[:last]
	if l.off == len(l.buf) {
		l.buf, l.off = l.buf[:0], 0
	}
	return s
}

// replace sets the elements to items, which the list then owns.
func (l *list) replace(items []string) {
	l.buf, l.off = items, 0
}

// asList returns o's list.
func (o *object) asList() *list { return o.coll.(*list) }
