package runtime

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// record returns a mail that appends name to *log.
func record(log *[]string, name string) Mail {
	return func() error { *log = append(*log, name); return nil }
}

func runAll(t *testing.T, mails []Mail) {
	t.Helper()
	for _, m := range mails {
		if err := m(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMailboxUrgentBeforeNormal(t *testing.T) {
	wake := make(chan struct{}, 1)
	mb := newMailbox(wake)
	if mb.HasMail() {
		t.Fatal("new mailbox has mail")
	}
	var log []string
	for _, put := range []struct {
		name   string
		urgent bool
	}{{"n1", false}, {"n2", false}, {"u1", true}, {"n3", false}, {"u2", true}} {
		var err error
		if put.urgent {
			err = mb.PutUrgent(record(&log, put.name))
		} else {
			err = mb.Put(record(&log, put.name))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !mb.HasMail() {
		t.Fatal("HasMail false after Put")
	}
	select {
	case <-wake:
	default:
		t.Fatal("Put did not wake the task")
	}
	mails := mb.take()
	if mb.HasMail() {
		t.Fatal("HasMail true after take")
	}
	runAll(t, mails)
	mb.recycle(mails)
	if want := "[u1 u2 n1 n2 n3]"; fmt.Sprint(log) != want {
		t.Fatalf("mails ran as %v, want %s", log, want)
	}
	// A second round reuses the recycled slice and still keeps the order.
	log = nil
	_ = mb.Put(record(&log, "n4"))
	_ = mb.PutUrgent(record(&log, "u3"))
	runAll(t, mb.take())
	if want := "[u3 n4]"; fmt.Sprint(log) != want {
		t.Fatalf("second round ran as %v, want %s", log, want)
	}
}

func TestMailboxClosedRefuses(t *testing.T) {
	mb := newMailbox(make(chan struct{}, 1))
	var log []string
	_ = mb.Put(record(&log, "dropped"))
	mb.close()
	if err := mb.Put(record(&log, "late")); !errors.Is(err, ErrMailboxClosed) {
		t.Fatalf("Put after close: %v, want ErrMailboxClosed", err)
	}
	if err := mb.PutUrgent(record(&log, "late")); !errors.Is(err, ErrMailboxClosed) {
		t.Fatalf("PutUrgent after close: %v, want ErrMailboxClosed", err)
	}
	runAll(t, mb.take())
	if len(log) != 0 {
		t.Fatalf("mails ran after close: %v", log)
	}
}

// TestMailboxConcurrentPuts: mails from many goroutines are all delivered,
// once each, in each sender's order; the wake channel never blocks a
// sender.
func TestMailboxConcurrentPuts(t *testing.T) {
	const senders, each = 4, 2000
	wake := make(chan struct{}, 1)
	mb := newMailbox(wake)
	var wg sync.WaitGroup
	got := make([][]int, senders) // written only by mails, on this goroutine
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				put := mb.Put
				if i%7 == 0 {
					put = mb.PutUrgent
				}
				if err := put(func() error { got[s] = append(got[s], i); return nil }); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	total := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for total < senders*each {
		if !mb.HasMail() {
			select {
			case <-wake:
			case <-done:
			}
			continue
		}
		mails := mb.take()
		total += len(mails)
		runAll(t, mails)
		mb.recycle(mails)
	}
	<-done
	for s, seq := range got {
		if len(seq) != each {
			t.Fatalf("sender %d: %d mails delivered, want %d", s, len(seq), each)
		}
		// Urgent mails may overtake normal ones of the same sender, but
		// each class keeps its order.
		lastU, lastN := -1, -1
		for _, i := range seq {
			last := &lastN
			if i%7 == 0 {
				last = &lastU
			}
			if i <= *last {
				t.Fatalf("sender %d: mail %d after %d", s, i, *last)
			}
			*last = i
		}
	}
}

// TestMailErrorStopsRunMails: a failing mail fails the task and the mails
// after it in the batch do not run.
func TestMailErrorStopsRunMails(t *testing.T) {
	mb := newMailbox(make(chan struct{}, 1))
	task := &Task{mailbox: mb}
	var log []string
	boom := errors.New("boom")
	_ = mb.Put(record(&log, "first"))
	_ = mb.Put(func() error { return boom })
	_ = mb.Put(record(&log, "after"))
	if err := task.runMails(); !errors.Is(err, boom) {
		t.Fatalf("runMails: %v", err)
	}
	if fmt.Sprint(log) != "[first]" {
		t.Fatalf("ran %v", log)
	}
}
