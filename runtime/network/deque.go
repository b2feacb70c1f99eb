package network

// deque is a growable ring buffer. Once it has grown to the largest size it
// needs, pushes and pops do not allocate. It is not safe for concurrent use;
// its owner's lock guards it.
type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) len() int { return d.n }

func (d *deque[T]) grow() {
	size := 2 * len(d.buf)
	if size == 0 {
		size = 8
	}
	nb := make([]T, size)
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque[T]) pushBack(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)%len(d.buf)] = v
	d.n++
}

func (d *deque[T]) pushFront(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = v
	d.n++
}

func (d *deque[T]) front() *T { return &d.buf[d.head] }

// at returns the i-th element from the front; i < len().
func (d *deque[T]) at(i int) *T { return &d.buf[(d.head+i)%len(d.buf)] }

func (d *deque[T]) popFront() (T, bool) {
	var zero T
	if d.n == 0 {
		return zero, false
	}
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return v, true
}

// removeAt removes and returns the i-th element from the front, keeping the
// order of the others.
func (d *deque[T]) removeAt(i int) T {
	v := *d.at(i)
	for j := i; j > 0; j-- {
		*d.at(j) = *d.at(j - 1)
	}
	var zero T
	*d.at(0) = zero
	d.head = (d.head + 1) % len(d.buf)
	d.n--
	return v
}

// insertAt inserts v before the i-th element from the front (i <= len()),
// keeping the order of the others.
func (d *deque[T]) insertAt(i int, v T) {
	d.pushFront(v)
	for j := 0; j < i; j++ {
		*d.at(j), *d.at(j + 1) = *d.at(j + 1), *d.at(j)
	}
}

// clear drops every element.
func (d *deque[T]) clear() {
	var zero T
	for i := 0; i < d.n; i++ {
		*d.at(i) = zero
	}
	d.head, d.n = 0, 0
}
