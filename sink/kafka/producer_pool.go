package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// slotState is where the transactional id of one slot stands.
type slotState int

const (
	// slotIdle: no transaction, or its last one is committed: the writer
	// may begin the next one under the id.
	slotIdle slotState = iota
	// slotOpen: the writer's current interval writes into it.
	slotOpen
	// slotPending: pre-committed at a barrier, waiting for its commit.
	slotPending
	// slotCommitting: a committer is ending it through the slot's client.
	slotCommitting
)

// slot is one transactional id of a writer's pool with the franz-go
// client that produces under it. The client is made on the slot's first
// use (InitProducerId) and kept: after its transaction is committed
// through it, the next transaction begins on the same client with no new
// InitProducerId. A client that must not be reused (its transaction was
// ended by another client, or ending it failed) is marked stale; the
// writer closes it and initialises a new one when it next needs the slot,
// which is safe then because the transaction is committed.
type slot struct {
	id    string
	index int

	// Guarded by the sink's pool mutex.
	state   slotState
	pending Committable // when pending or committing
	cl      *kgo.Client // nil until first use
	stale   bool        // cl must be replaced before the next transaction
	removed bool        // the writer closed: whoever holds cl last closes it
}

// slotPool is shared by the writers and committers of one Sink (every
// subtask, every attempt in this process). Committers find here the slot
// of a committable they commit, and what the committers committed.
type slotPool struct {
	mu   sync.Mutex
	byID map[string]*slot
	done map[string]Committable // by transactional id: the last committed
}

func newSlotPool() *slotPool {
	return &slotPool{byID: map[string]*slot{}, done: map[string]Committable{}}
}

func sameTxn(a, b Committable) bool {
	return a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.ProducerEpoch == b.ProducerEpoch
}

// committed reports whether a committer of this process committed c.
func (p *slotPool) committed(c Committable) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.done[c.TransactionalID]
	return ok && sameTxn(d, c)
}

// register adds a writer's slot.
func (p *slotPool) register(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID[s.id] = s
}

// acquire makes s the writer's open slot if it is idle.
func (p *slotPool) acquire(s *slot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.state != slotIdle {
		return false
	}
	s.state = slotOpen
	return true
}

// release returns an open slot to idle (its transaction was aborted or
// never began).
func (p *slotPool) release(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.state = slotIdle
}

// invalidate marks the client of the writer's open slot as not to be
// reused.
func (p *slotPool) invalidate(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.stale = true
}

// precommitted hands the slot's transaction over to the committers.
func (p *slotPool) precommitted(s *slot, c Committable) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.state, s.pending = slotPending, c
}

// takeForCommit returns the slot whose pending transaction c is, with its
// client, marked committing, when its client can end it (transaction
// version 2 only); else nil.
func (p *slotPool) takeForCommit(c Committable) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.byID[c.TransactionalID]
	if c.TransactionVersion < 2 || s == nil || s.state != slotPending || !sameTxn(s.pending, c) || s.cl == nil || s.stale || s.removed {
		return nil
	}
	s.state = slotCommitting
	return s
}

// commitFailed gives back a slot whose client could not end its
// transaction: it stays pending (another way must commit it) and its
// client is not reused.
func (p *slotPool) commitFailed(s *slot) (closeClient *kgo.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.state, s.stale = slotPending, true
	if s.removed {
		closeClient, s.cl = s.cl, nil
	}
	return closeClient
}

// markCommitted records that c is committed and frees its slot. viaSlot
// is the slot whose own client ended it, and reuse says whether that
// client may begin the id's next transaction; a client that was not used
// (it still believes it is in that transaction) or may not be reused is
// marked stale. It returns a client to close when the slot's writer is
// gone.
func (p *slotPool) markCommitted(c Committable, viaSlot *slot, reuse bool) (closeClient *kgo.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[c.TransactionalID] = c
	s := viaSlot
	if s != nil && !reuse {
		s.stale = true
	}
	if s == nil {
		s = p.byID[c.TransactionalID]
		if s == nil || (s.state != slotPending && s.state != slotCommitting) || !sameTxn(s.pending, c) {
			return nil
		}
		s.stale = true
	}
	s.state, s.pending = slotIdle, Committable{}
	if s.removed {
		closeClient, s.cl = s.cl, nil
	}
	return closeClient
}

// setClient installs the client of the writer's open slot and returns
// the one it replaces, to close.
func (p *slotPool) setClient(s *slot, cl *kgo.Client) (old *kgo.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, s.cl, s.stale = s.cl, cl, false
	return old
}

// unregister removes a closing writer's slots and returns the clients to
// close now; a slot being committed keeps its client for the committer,
// which closes it when done.
func (p *slotPool) unregister(slots []*slot) []*kgo.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*kgo.Client
	for _, s := range slots {
		if p.byID[s.id] == s {
			delete(p.byID, s.id)
		}
		s.removed = true
		if s.state != slotCommitting && s.cl != nil {
			out = append(out, s.cl)
			s.cl = nil
		}
	}
	return out
}
