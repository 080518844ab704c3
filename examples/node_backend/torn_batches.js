#!/usr/bin/env node
// file_backend.js with one planted crash bug, for checking that the kit finds it
// without any fault point: a batch added to a session that has events is written as
// one line per event, each line written and fsynced before the next. A process killed
// between two lines leaves the first events of its batch in the log, a batch neither
// wholly there nor wholly absent. The kit's trace of the process's system calls finds
// the state between two lines on every seed, and rejects it naming APPEND-003, as it
// does the same bug in Python (EventAtATime in tests/quality/hard_backends.py).
//
//   checkpointspec run --process 'node examples/node_backend/torn_batches.js' --only DUR-002::killed_at_every_system_call --profile quick

'use strict';

const { FileBackend, main } = require('./file_backend.js');

class LinePerEvent extends FileBackend {
  append(request) {
    const events = request.events || [];
    if (events.length < 2) return super.append(request);
    // The bug: the first event is checked and written, then the others follow one
    // line (and one fsync) at a time.
    let head = super.append({ ...request, events: events.slice(0, 1) });
    for (const event of events.slice(1)) {
      head = super.append({ session_id: request.session_id, events: [event] });
    }
    return head;
  }
}

main(LinePerEvent);
