#!/usr/bin/env node
// file_backend.js with one planted bug, for checking that the kit finds it:
// append never compares expected_head with the head. A writer that read a stale head
// appends on top of a log it has not seen, instead of getting CheckpointConflictError.
// The kit rejects it naming APPEND-002, as it does the same bug in Python
// (IgnoresExpectedHead in tests/quality/broken_backends.py).
//
//   checkpointspec run --process 'node examples/node_backend/planted_bug.js' --only APPEND-002:: --profile quick

'use strict';

const { FileBackend, main } = require('./file_backend.js');

class IgnoresExpectedHead extends FileBackend {
  append(request) {
    // The bug: expected_head is dropped before the store sees it.
    return super.append({ ...request, expected_head: null });
  }
}

main(IgnoresExpectedHead);
