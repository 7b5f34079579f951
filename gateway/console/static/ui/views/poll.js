// Poll is what a view that polls the API keeps between renders: the timer of its next poll,
// the abort controller of the one in flight, and a session number that changes when the view
// is left (or shown again), so that a poll of an older render stops.
export class Poll {
  constructor() {
    this.timer = null;
    this.aborter = null;
    this.session = 0;
  }

  // halt cancels the next poll and the one in flight.
  halt() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.aborter) this.aborter.abort();
    this.aborter = null;
  }

  // stop halts and ends the current session.
  stop() {
    this.session += 1;
    this.halt();
  }
}
