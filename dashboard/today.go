package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/store"
)

// Today's totals in the store (Options.Store). Each process that serves
// on a day writes its own totals of that day to a slot of its own, the
// record dayKey(day, n): n is the first number free when it first writes,
// taken with PutIfAbsent, so that two instances never share one. Today is
// the sum of the day's slots: a restarted process takes a new slot and
// counts its old one among the others, and instances that share a store
// add up. A process writes its slot at most every writeEvery (and once
// more when it flushes, or when the day ends), and reads the other slots
// at most every readEvery, when the overview is asked for.
const (
	writeEvery   = 5 * time.Second
	readEvery    = 10 * time.Second
	maxSlots     = 256
	storeTimeout = 5 * time.Second
)

// dayKey is the store record of slot n of a day's totals.
func dayKey(day date, n int) string { return "dashboard/day/" + day.String() + "/" + strconv.Itoa(n) }

// days is the state of today's totals in the store. Dashboard.mu guards
// it, but for storeMu, which one store write at a time holds from its
// snapshot to its end, so that slots are written in the order their
// totals were taken.
type days struct {
	storeMu sync.Mutex

	slot    int         // this process's slot of Dashboard.day; 0: none yet
	dirty   bool        // today's totals changed since the last snapshot
	writing bool        // a writer goroutine runs
	timer   *time.Timer // a write waiting for writeEvery to pass
	wrote   time.Time   // when the last snapshot was taken
	ended   *dayWrite   // the last day's final totals, to write first

	others  map[int]Totals // the day's slots as last read (ours left out when summed)
	read    time.Time      // when others was read (zero: never)
	readDay date
	reading bool
	err     error // the last store failure; nil after a success
}

// dayWrite is a write of one day's totals of this process.
type dayWrite struct {
	day  date
	slot int // 0: take one, from `from` on
	from int
	t    Totals
}

// changedLocked notes that today's totals changed at now: it starts the
// writer when a write is due, else makes sure one comes within
// writeEvery. d.mu is held.
func (d *Dashboard) changedLocked(now time.Time) {
	if d.o.Store == nil {
		return
	}
	d.days.dirty = true
	d.kickLocked(now, false)
}

// kickLocked starts the writer if something waits to be written and
// writeEvery has passed since the last write (or due says it is time),
// else arms the timer. d.mu is held.
func (d *Dashboard) kickLocked(now time.Time, due bool) {
	dd := &d.days
	if dd.writing || dd.timer != nil || (!dd.dirty && dd.ended == nil) {
		return
	}
	if wait := writeEvery - now.Sub(dd.wrote); !due && dd.ended == nil && !dd.wrote.IsZero() && wait > 0 {
		dd.timer = time.AfterFunc(wait, func() {
			d.mu.Lock()
			d.days.timer = nil
			d.kickLocked(d.o.Now(), true)
			d.mu.Unlock()
		})
		return
	}
	dd.writing = true
	go d.writer()
}

// writer does the writes waiting (the ended day's, then today's), then
// ends; after a failure the next change tries again.
func (d *Dashboard) writer() {
	d.writeWaiting(context.Background())
	d.mu.Lock()
	d.days.writing = false
	d.kickLocked(d.o.Now(), false) // what changed meanwhile (a failure waits writeEvery)
	d.mu.Unlock()
}

// writeWaiting does the writes waiting, at most one per day, until one
// fails.
func (d *Dashboard) writeWaiting(ctx context.Context) error {
	for range 2 {
		did, err := d.writeNext(ctx)
		if !did || err != nil {
			return err
		}
	}
	return nil
}

// Flush writes today's totals (and the last day's, if they wait) to the
// store now, for a process about to stop; Observe has them written
// otherwise. It returns the store's failure.
func (d *Dashboard) Flush(ctx context.Context) error {
	if d.o.Store == nil {
		return nil
	}
	d.mu.Lock()
	if d.days.timer != nil {
		d.days.timer.Stop()
		d.days.timer = nil
	}
	d.mu.Unlock()
	return d.writeWaiting(ctx)
}

// writeNext takes the next write (the ended day's first) and does it,
// reporting whether there was one. A failed write of today's totals
// leaves them to write again.
func (d *Dashboard) writeNext(ctx context.Context) (bool, error) {
	dd := &d.days
	dd.storeMu.Lock()
	defer dd.storeMu.Unlock()
	d.mu.Lock()
	var w dayWrite
	switch {
	case dd.ended != nil:
		w, dd.ended = *dd.ended, nil
	case dd.dirty:
		dd.dirty, dd.wrote = false, d.o.Now()
		w = dayWrite{day: d.day, slot: dd.slot, from: 1, t: d.today}
		if dd.readDay == d.day {
			for n := range dd.others {
				w.from = max(w.from, n+1) // taken already
			}
		}
	default:
		d.mu.Unlock()
		return false, nil
	}
	d.mu.Unlock()

	slot, err := d.writeDay(ctx, w)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failedLocked(err)
	if w.day == d.day {
		if err != nil {
			dd.dirty = true
		} else {
			dd.slot = slot
		}
	}
	return true, err
}

// writeDay writes w to its slot, taking one first if it has none, and
// returns the slot.
func (d *Dashboard) writeDay(ctx context.Context, w dayWrite) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	b, err := json.Marshal(w.t)
	if err != nil {
		return 0, err
	}
	if w.slot > 0 {
		return w.slot, d.o.Store.Put(ctx, dayKey(w.day, w.slot), b)
	}
	for n := max(w.from, 1); n <= maxSlots; n++ {
		_, stored, err := d.o.Store.PutIfAbsent(ctx, dayKey(w.day, n), b)
		if err != nil {
			return 0, err
		}
		if stored {
			return n, nil
		}
	}
	return 0, errors.New("every slot of the day's totals is taken (" + strconv.Itoa(maxSlots) + " processes served today)")
}

// endDayLocked is called as the day of d.today ends: its totals are
// written once more if they changed, and the next day starts without a
// slot. d.mu is held.
func (d *Dashboard) endDayLocked(now time.Time) {
	if d.o.Store == nil {
		return
	}
	dd := &d.days
	if dd.dirty {
		dd.ended = &dayWrite{day: d.day, slot: dd.slot, from: 1, t: d.today}
	}
	dd.dirty, dd.slot = false, 0
	d.kickLocked(now, true)
}

// othersLocked returns the sum of the other slots of today as last read.
// d.mu is held.
func (d *Dashboard) othersLocked() Totals {
	var t Totals
	dd := &d.days
	if dd.readDay != d.day {
		return t
	}
	for n, v := range dd.others {
		if n != dd.slot {
			t = t.plus(v)
		}
	}
	return t
}

// refreshOthers reads today's slots from the store when they were not
// read within readEvery (or not today).
func (d *Dashboard) refreshOthers(ctx context.Context, now time.Time) {
	if d.o.Store == nil {
		return
	}
	dd := &d.days
	d.mu.Lock()
	day := d.day
	if dd.reading || (dd.readDay == day && !dd.read.IsZero() && now.Sub(dd.read) < readEvery) {
		d.mu.Unlock()
		return
	}
	dd.reading = true
	d.mu.Unlock()

	slots, err := d.readDay(ctx, day)
	d.mu.Lock()
	defer d.mu.Unlock()
	dd.reading = false
	d.failedLocked(err)
	if err == nil {
		dd.others, dd.read, dd.readDay = slots, now, day
	}
}

// readDay reads a day's slots, up to the first free number.
func (d *Dashboard) readDay(ctx context.Context, day date) (map[int]Totals, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	out := map[int]Totals{}
	for n := 1; n <= maxSlots; n++ {
		b, err := d.o.Store.Get(ctx, dayKey(day, n))
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		var t Totals
		if json.Unmarshal(b, &t) != nil {
			t = Totals{} // not ours to read: it counts for nothing, and the slot stays taken
		}
		out[n] = t
	}
	return out, nil
}

// failedLocked records the outcome of a store call: the first failure
// after a success is logged. d.mu is held.
func (d *Dashboard) failedLocked(err error) {
	dd := &d.days
	if err != nil && dd.err == nil {
		d.o.Log.Warn("the dashboard's totals of today could not go through the store", "err", err)
	}
	dd.err = err
}
