// @ts-check
// An async checkpointer for the lite-agent SDK's `Checkpointer` interface, standard
// library only, checked by checkpointspec through its lite-agent bridge:
//
//   checkpointspec run --lite-agent ./examples/lite_agent_checkpointer/checkpointer.mjs#createJsonCheckpointer \
//       --declare durable,multi_process --profile quick
//
// Plain JavaScript with JSDoc types (`tsc --checkJs` checks it), so that Node runs it
// as it is, with no build step.
//
// The store is a directory: `sessions/<h>.json` holds one session whole, where <h> is
// the SHA-256 of the session id, so that no id can choose a file name and no two ids
// share one. Every write makes a complete new file under a temporary name, fsyncs it,
// renames it over the old one and fsyncs the directory: a process killed at any moment
// leaves the old file or the new one (durable), never half of either.
//
// Writes take the store's lock, so several processes may share a store (multi_process):
// the lock is a Unix socket bound to an abstract name (Linux) derived from the store's
// path. Binding a name already bound fails, and the kernel frees the name when its
// process dies, so a killed writer's lock is never left behind for anyone to take over.

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, realpath, rename, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';

const MAX_SESSION_ID = 256; // code points, not UTF-16 units
const SUFFIX = '.json';

/** @typedef {{ type: string, [field: string]: unknown }} SessionEvent */
/** @typedef {{ seq: number, sessionId: string, parentSeq: number | null, ts: string, event: SessionEvent }} StoredEvent */
/** @typedef {{ sessionId: string, updated: number, events: StoredEvent[] }} SessionFile */

// -- errors, by the names and properties the SDK and the bridge know ---------------------

export class CheckpointConflictError extends Error {
  /** @param {string} sessionId @param {number} expected @param {number} actual */
  constructor(sessionId, expected, actual) {
    super(`checkpoint conflict on '${sessionId}': expected head ${expected}, found ${actual}`);
    this.name = 'CheckpointConflictError';
    this.sessionId = sessionId;
    this.expected = expected;
    this.actual = actual;
  }
}

export class InvalidArgumentError extends Error {
  /** @param {string} argument @param {string} reason @param {string} reasonCode @param {string} ruleId */
  constructor(argument, reason, reasonCode, ruleId) {
    super(`${argument}: ${reason}`);
    this.name = 'InvalidArgumentError';
    this.argument = argument;
    this.reason = reason;
    this.reasonCode = reasonCode;
    this.ruleId = ruleId;
  }
}

export class CheckpointerClosedError extends Error {
  /** @param {string} operation */
  constructor(operation) {
    super(`${operation} on a closed checkpointer`);
    this.name = 'CheckpointerClosedError';
    this.operation = operation;
  }
}

/** @param {unknown} sessionId */
function checkSessionId(sessionId) {
  const id = String(sessionId);
  if (id === '') throw new InvalidArgumentError('sessionId', 'empty', 'empty', 'ARG-001');
  if ([...id].length > MAX_SESSION_ID) throw new InvalidArgumentError('sessionId', `longer than ${MAX_SESSION_ID} code points`, 'too_long', 'ARG-001');
  if (id.includes('\0')) throw new InvalidArgumentError('sessionId', 'holds NUL', 'contains_nul', 'ARG-001');
}

/** @param {string} argument @param {number | undefined} value */
function checkSeq(argument, value) {
  if (value !== undefined && value < 0) throw new InvalidArgumentError(argument, `${value} is negative`, 'negative', 'ARG-002');
}

/** Holds the store's lock (see the top of this file) until the returned function is
 *  called; waits while another process or handle holds it.
 *  @param {string} dir @returns {Promise<() => Promise<void>>} */
async function lockStore(dir) {
  const name = '\0lite-agent-example-' + createHash('sha256').update(await realpath(dir)).digest('hex');
  for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
    const server = createServer();
    const bound = await new Promise((resolve, reject) => {
      server.once('error', (/** @type {NodeJS.ErrnoException} */ error) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error)));
      server.listen(name, () => resolve(true));
    });
    if (bound) {
      server.unref(); // a held lock does not keep the process alive
      return () => new Promise((resolve) => server.close(() => resolve(undefined)));
    }
    await pause(wait); // another writer holds it: back off, then try again
  }
}

/** @param {string} dir */
async function syncDirectory(dir) {
  const directory = await open(dir, 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

/** Code point order (JavaScript's `<` compares UTF-16 units). @param {string} a @param {string} b */
function compareCodePoints(a, b) {
  const x = [...a].map((c) => /** @type {number} */ (c.codePointAt(0)));
  const y = [...b].map((c) => /** @type {number} */ (c.codePointAt(0)));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return /** @type {number} */ (x[i]) - /** @type {number} */ (y[i]);
  return x.length - y.length;
}

/**
 * A lite-agent Checkpointer over a directory.
 * @param {{ dir: string }} options
 */
export function createJsonCheckpointer(options) {
  const sessions = join(options.dir, 'sessions');
  let closed = false;
  let lastStamp = 0; // modification times stay strictly increasing within the process
  /** @type {Promise<unknown>} */
  let writes = Promise.resolve();

  /** @param {string} id */
  const fileOf = (id) => join(sessions, createHash('sha256').update(id).digest('hex') + SUFFIX);

  /** @param {string} operation */
  const open_ = (operation) => {
    if (closed) throw new CheckpointerClosedError(operation);
  };

  /** @param {string} id @returns {Promise<SessionFile | null>} */
  const load = async (id) => {
    try {
      return JSON.parse(await readFile(fileOf(id), 'utf8'));
    } catch (error) {
      if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT') return null;
      throw error;
    }
  };

  /** Replace a file whole: temporary file, fsync, rename, fsync the directory.
   *  @param {string} file @param {string | null} body null removes the file */
  const replace = async (file, body) => {
    if (body === null) await rm(file, { force: true });
    else {
      const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`;
      const handle = await open(temporary, 'w');
      try {
        await handle.writeFile(body);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
    }
    await syncDirectory(sessions);
  };

  /** Runs `write` after every earlier write of this process has ended, holding the
   *  store's lock against every other process.
   *  @template T @param {() => Promise<T>} write @returns {Promise<T>} */
  const exclusive = (write) => {
    const locked = async () => {
      // A directory made here exists after a power loss only once its parent is synced.
      if (await mkdir(sessions, { recursive: true })) await syncDirectory(options.dir);
      const unlock = await lockStore(options.dir);
      try {
        return await write();
      } finally {
        await unlock();
      }
    };
    const done = writes.then(locked, locked);
    writes = done.catch(() => undefined);
    return done;
  };

  const stamp = () => (lastStamp = Math.max(Date.now(), lastStamp + 1));

  /** @param {SessionFile | null} session */
  const headOf = (session) => (session?.events.length ? /** @type {StoredEvent} */ (session.events.at(-1)).seq : 0);

  /** truncate's write, once its turn has come.
   *  @param {string} sessionId @param {number} toSeq @param {number | undefined} expectedHead */
  const cut = async (sessionId, toSeq, expectedHead) => {
    const session = await load(sessionId);
    const head = headOf(session);
    if (expectedHead !== undefined && expectedHead !== head) throw new CheckpointConflictError(sessionId, expectedHead, head);
    if (toSeq > head) throw new InvalidArgumentError('toSeq', `${toSeq} is beyond the head ${head}`, 'beyond_head', 'TRUNC-002');
    if (session === null || toSeq === head) return; // nothing changes, not even the mtime
    session.events = session.events.filter((e) => e.seq <= toSeq);
    session.updated = stamp();
    await replace(fileOf(sessionId), JSON.stringify(session));
  };

  return {
    /** @param {string} sessionId @param {SessionEvent[]} events @param {number} [expectedHead] */
    async append(sessionId, events, expectedHead) {
      open_('append');
      checkSessionId(sessionId);
      checkSeq('expectedHead', expectedHead);
      return exclusive(async () => {
        const session = (await load(sessionId)) ?? { sessionId, updated: 0, events: [] };
        const head = headOf(session);
        if (expectedHead !== undefined && expectedHead !== head) throw new CheckpointConflictError(sessionId, expectedHead, head);
        if (!events.length) return head;
        const ts = new Date().toISOString();
        events.forEach((event, i) => {
          const seq = head + i + 1;
          session.events.push({ seq, sessionId, parentSeq: seq === 1 ? null : seq - 1, ts, event });
        });
        session.updated = stamp();
        await replace(fileOf(sessionId), JSON.stringify(session));
        return headOf(session);
      });
    },

    /** One snapshot: the whole file is read before the first event is yielded.
     *  @param {string} sessionId @param {{ sinceSeq?: number }} [options] @returns {AsyncIterable<StoredEvent>} */
    read(sessionId, options) {
      open_('read');
      checkSessionId(sessionId);
      checkSeq('sinceSeq', options?.sinceSeq);
      const snapshot = load(sessionId);
      return (async function* () {
        const since = options?.sinceSeq ?? 0;
        for (const event of (await snapshot)?.events ?? []) if (event.seq > since) yield event;
      })();
    },

    /** @param {string} sessionId */
    async head(sessionId) {
      open_('head');
      checkSessionId(sessionId);
      return headOf(await load(sessionId));
    },

    /** Most recently modified first, ties by id in code point order. */
    async list() {
      open_('list');
      let names;
      try {
        names = await readdir(sessions);
      } catch (error) {
        if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT') return [];
        throw error;
      }
      const found = [];
      for (const name of names.filter((n) => n.endsWith(SUFFIX))) {
        const session = /** @type {SessionFile} */ (JSON.parse(await readFile(join(sessions, name), 'utf8')));
        found.push({ id: session.sessionId, mtime: session.updated });
      }
      return found.sort((a, b) => b.mtime - a.mtime || compareCodePoints(a.id, b.id));
    },

    /** @param {string} sessionId */
    async delete(sessionId) {
      open_('delete');
      checkSessionId(sessionId);
      await exclusive(() => replace(fileOf(sessionId), null));
    },

    /** Drops every event after `toSeq`; with `expectedHead`, only if the head is still that.
     *  @param {string} sessionId @param {number} toSeq @param {number} [expectedHead] */
    async truncate(sessionId, toSeq, expectedHead) {
      open_('truncate');
      checkSessionId(sessionId);
      checkSeq('toSeq', toSeq);
      checkSeq('expectedHead', expectedHead);
      await exclusive(() => cut(sessionId, toSeq, expectedHead));
    },

    /** Every session file parses and holds a gapless log of its own session. */
    async checkIntegrity() {
      open_('checkIntegrity');
      const problems = [];
      for (const name of await readdir(sessions).catch(() => /** @type {string[]} */ ([]))) {
        if (!name.endsWith(SUFFIX)) continue;
        try {
          const session = /** @type {SessionFile} */ (JSON.parse(await readFile(join(sessions, name), 'utf8')));
          if (session.events.some((e, i) => e.seq !== i + 1)) problems.push(`${name}: seqs are not 1, 2, 3, ...`);
        } catch (error) {
          problems.push(`${name}: ${/** @type {Error} */ (error).message}`);
        }
      }
      return { ok: problems.length === 0, detail: problems.length ? `${problems.length} damaged sessions` : 'ok', problems };
    },

    async close() {
      closed = true;
      await writes;
    },
  };
}
