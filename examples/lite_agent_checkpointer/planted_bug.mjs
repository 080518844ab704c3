// @ts-check
// checkpointer.mjs with one planted bug, for checking that the kit finds it: truncate
// takes an expectedHead and never compares it with the head, so a restore that read a
// stale head cuts away events appended since, instead of getting
// CheckpointConflictError. The kit rejects it naming TRUNC-003, as it does the same bug
// in Python (TruncateIgnoresExpectedHead in tests/quality/broken_backends.py).
//
//   checkpointspec run --lite-agent ./examples/lite_agent_checkpointer/planted_bug.mjs#createJsonCheckpointer \
//       --declare durable,multi_process --only TRUNC-003:: --profile quick

import { createJsonCheckpointer as createCorrect } from './checkpointer.mjs';

/** @param {{ dir: string }} options */
export function createJsonCheckpointer(options) {
  const checkpointer = createCorrect(options);
  const truncate = checkpointer.truncate;
  return {
    ...checkpointer,
    /** @param {string} sessionId @param {number} toSeq @param {number} [expectedHead] */
    async truncate(sessionId, toSeq, expectedHead) {
      if (expectedHead !== undefined && expectedHead < 0) return truncate(sessionId, toSeq, expectedHead);
      // The bug: a valid expectedHead is dropped before the store sees it.
      return truncate(sessionId, toSeq);
    },
  };
}
