package keyspace

// Sorted sets: a map from member to score, and a skip list ordered by (score,
// member) whose links count the nodes they skip, so that ranks are found in
// logarithmic time, as in Redis.
const (
	zslMaxLevel = 32
	// maxPackedZSetEntries and maxPackedZSetValue are Redis 7.0's
	// zset-max-listpack-entries and -value: under them Redis keeps a listpack,
	// which ZSCAN returns whole.
	maxPackedZSetEntries = 128
	maxPackedZSetValue   = 64
)

type zslNode struct {
	member   string
	score    float64
	backward *zslNode
	level    []zslLevel
}

type zslLevel struct {
	forward *zslNode
	span    int
}

type zset struct {
	dict   map[string]float64
	head   *zslNode
	tail   *zslNode
	length int
	level  int
	// seed drives the choice of node levels; fixed, so that every node builds
	// the same lists (only speed depends on it, never a reply).
	seed uint64
	// big is set once Redis would have left the listpack form.
	big bool
}

func newZSet(firstMember []byte) *zset {
	return &zset{
		dict:  make(map[string]float64),
		head:  &zslNode{level: make([]zslLevel, zslMaxLevel)},
		level: 1,
		seed:  0x9E3779B97F4A7C15,
		big:   len(firstMember) > maxPackedZSetValue,
	}
}

// asZSet returns o's sorted set.
func (o *object) asZSet() *zset { return o.coll.(*zset) }

// randomLevel returns a level with P(level > n) = 4^-n, from a xorshift stream.
func (z *zset) randomLevel() int {
	level := 1
	for level < zslMaxLevel {
		z.seed ^= z.seed << 13
		z.seed ^= z.seed >> 7
		z.seed ^= z.seed << 17
		if z.seed&3 != 0 {
			break
		}
		level++
	}
	return level
}

// before reports whether (s1, m1) sorts before (s2, m2).
func before(s1 float64, m1 string, s2 float64, m2 string) bool {
	return s1 < s2 || (s1 == s2 && m1 < m2)
}

// set adds member with score or moves it to score, and reports whether it is new.
func (z *zset) set(member string, score float64) bool {
	if !z.big && score == 0 {
		score = 0 // Redis's listpack stores -0 as 0
	}
	cur, exists := z.dict[member]
	if exists {
		if cur == score {
			return false
		}
		z.unlink(cur, member)
	} else if len(member) > maxPackedZSetValue || z.length+1 > maxPackedZSetEntries {
		z.big = true
	}
	z.dict[member] = score
	z.insert(score, member)
	return !exists
}

// remove deletes member and reports whether it was there.
func (z *zset) remove(member string) bool {
	score, ok := z.dict[member]
	if !ok {
		return false
	}
	delete(z.dict, member)
	z.unlink(score, member)
	return true
}

func (z *zset) insert(score float64, member string) {
	var update [zslMaxLevel]*zslNode
	var rank [zslMaxLevel]int
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		if i < z.level-1 {
			rank[i] = rank[i+1]
		}
		for f := x.level[i].forward; f != nil && before(f.score, f.member, score, member); f = x.level[i].forward {
			rank[i] += x.level[i].span
			x = f
		}
		update[i] = x
	}
	level := z.randomLevel()
	if level > z.level {
		for i := z.level; i < level; i++ {
			rank[i] = 0
			update[i] = z.head
			z.head.level[i].span = z.length
		}
		z.level = level
	}
	x = &zslNode{member: member, score: score, level: make([]zslLevel, level)}
	for i := 0; i < level; i++ {
		x.level[i].forward = update[i].level[i].forward
		update[i].level[i].forward = x
		x.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = rank[0] - rank[i] + 1
	}
	for i := level; i < z.level; i++ {
		update[i].level[i].span++
	}
	if update[0] != z.head {
		x.backward = update[0]
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x
	} else {
		z.tail = x
	}
	z.length++
}

// unlink removes the node (score, member) from the skip list.
func (z *zset) unlink(score float64, member string) {
	var update [zslMaxLevel]*zslNode
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for f := x.level[i].forward; f != nil && before(f.score, f.member, score, member); f = x.level[i].forward {
			x = f
		}
		update[i] = x
	}
	x = x.level[0].forward
	for i := 0; i < z.level; i++ {
		if update[i].level[i].forward == x {
			update[i].level[i].span += x.level[i].span - 1
			update[i].level[i].forward = x.level[i].forward
		} else {
			update[i].level[i].span--
		}
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x.backward
	} else {
		z.tail = x.backward
	}
	for z.level > 1 && z.head.level[z.level-1].forward == nil {
		z.level--
	}
	z.length--
}

// rank returns the 0-based rank of member, which must be present.
func (z *zset) rank(member string) int {
	score := z.dict[member]
	rank := 0
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for f := x.level[i].forward; f != nil && !before(score, member, f.score, f.member); f = x.level[i].forward {
			rank += x.level[i].span
			x = f
		}
		if x != z.head && x.member == member {
			return rank - 1
		}
	}
	return -1
}

// byRank returns the node at 0-based rank, which must be in range.
func (z *zset) byRank(rank int) *zslNode {
	rank++
	traversed := 0
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && traversed+x.level[i].span <= rank {
			traversed += x.level[i].span
			x = x.level[i].forward
		}
		if traversed == rank {
			return x
		}
	}
	return nil
}

// A bound is one end of a range: of scores, or of members (BYLEX). In a lex
// bound, inf is -1 for "-" and +1 for "+", which sort before and after all.
type bound struct {
	score float64
	lex   string
	inf   int
	ex    bool
}

// zrange is a score or lex range with Redis's tests.
type zrange struct {
	min, max bound
	lex      bool
}

// cmpBound compares a node with a bound: <0 before it, 0 on it, >0 after.
func (r *zrange) cmpBound(x *zslNode, b *bound) int {
	if r.lex {
		switch {
		case b.inf != 0:
			return -b.inf
		case x.member < b.lex:
			return -1
		case x.member > b.lex:
			return 1
		}
		return 0
	}
	switch {
	case x.score < b.score:
		return -1
	case x.score > b.score:
		return 1
	}
	return 0
}

func (r *zrange) gteMin(x *zslNode) bool {
	c := r.cmpBound(x, &r.min)
	return c > 0 || (c == 0 && !r.min.ex)
}

func (r *zrange) lteMax(x *zslNode) bool {
	c := r.cmpBound(x, &r.max)
	return c < 0 || (c == 0 && !r.max.ex)
}

// empty reports whether the range can hold nothing (min past max, or equal
// with an exclusive end).
func (r *zrange) empty() bool {
	var c int
	if r.lex {
		a, b := r.min, r.max
		switch {
		case a.inf != 0 && a.inf == b.inf:
			c = 0
		case a.inf < 0 || b.inf > 0:
			c = -1
		case a.inf > 0 || b.inf < 0:
			c = 1
		case a.lex < b.lex:
			c = -1
		case a.lex > b.lex:
			c = 1
		}
	} else {
		switch {
		case r.min.score > r.max.score:
			c = 1
		case r.min.score < r.max.score:
			c = -1
		}
	}
	return c > 0 || (c == 0 && (r.min.ex || r.max.ex))
}

// first returns the first node in range, or nil.
func (z *zset) first(r *zrange) *zslNode {
	if r.empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for f := x.level[i].forward; f != nil && !r.gteMin(f); f = x.level[i].forward {
			x = f
		}
	}
	x = x.level[0].forward
	if x == nil || !r.lteMax(x) {
		return nil
	}
	return x
}

// last returns the last node in range, or nil.
func (z *zset) last(r *zrange) *zslNode {
	if r.empty() {
		return nil
	}
	x := z.head
	for i := z.level - 1; i >= 0; i-- {
		for f := x.level[i].forward; f != nil && r.lteMax(f); f = x.level[i].forward {
			x = f
		}
	}
	if x == z.head || !r.gteMin(x) {
		return nil
	}
	return x
}

// clone returns a copy sharing nothing mutable (COPY).
func (z *zset) clone() *zset {
	c := newZSet(nil)
	c.big = z.big
	for x := z.head.level[0].forward; x != nil; x = x.level[0].forward {
		c.dict[x.member] = x.score
		c.insert(x.score, x.member)
	}
	return c
}
