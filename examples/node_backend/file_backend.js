#!/usr/bin/env node
// A checkpointer in Node.js, standard library only, that speaks checkpointspec's
// stdio protocol (docs/stdio-protocol.md). One process serves one handle at a time
// (after `close`, the next one: it declares `reusable`): it reads one JSON request
// per line on stdin and writes its replies on stdout.
//
//   checkpointspec run --process 'node examples/node_backend/file_backend.js' --profile quick
//
// The store is a directory of files:
//
//   FORMAT              {"format":"checkpointspec-node-file","version":1}: a later,
//                       incompatible layout raises its version, and older code refuses it
//   sessions/<h>.log    one session; <h> is the SHA-256 of the session id, so no id can
//                       choose a file name (ID-002, ID-003). Line 1 is a header
//                       {"session_id", "generation", "deleted"?}; every further line is
//                       one appended batch, `<checksum> {"seq": first seq, "ts", "events"}`:
//                       a damaged batch is reported, never returned (INTEG-002).
//   locks/<h>.write     held while one process writes the session (a lock file: see below)
//   locks/<h>.maint     the session's maintenance lock, held until release, close or death
//
// Why it is safe to kill at any moment (DURABLE, DUR-002, KILL-001):
// - An append writes its whole batch as one line with one write, fsyncs the file, and
//   only then answers. A kill in the middle of the write leaves a line without its
//   final "\n": readers ignore it, and the next writer (or the next process to open
//   the store) cuts it off and reports it in check_integrity's `repairs`.
// - Everything else (a session's first append, truncate, delete, cutting a torn tail)
//   writes a complete new file under a temporary name, fsyncs it, renames it over the
//   log and fsyncs the directory: a kill leaves the old file or the new one.
// - Files are only ever extended in place or replaced whole, so a reader needs no lock:
//   what it reads up to its last "\n" is the log as it was at some moment (READ-003).
//
// Why several processes may share a store (MULTI_PROCESS): Node has no flock(), so a
// lock is a file created atomically (written under a unique name, then link()ed to the
// lock's name, which fails if the name exists) holding the holder's identity. A lock
// whose holder has died is taken over; see `claim` for how without a race.

'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const PROTOCOL = 1;
const FORMAT = { format: 'checkpointspec-node-file', version: 1 };
const MAX_SESSION_ID = 256; // code points, not UTF-16 units
const READ_CHUNK = 500; // events per `events` reply of a read
const BUSY_AFTER_MS = 30_000; // then StoreBusyError: retryable, unlike a conflict
const CAPABILITIES = ['delete', 'list', 'truncate', 'durable', 'multi_process', 'generation', 'maintenance'];

// The places inside a write where the kit may pause or kill this process
// (docs/stdio-protocol.md, "Fault points"), in a fixed order.
const FAULT_POINTS = [
  'append.before_write', // the session is locked, nothing written
  'append.after_write', // the batch is in the file, not yet fsynced
  'append.after_fsync', // durable, not yet acknowledged
  'append.before_rename', // a session's first batch: its new file is written and fsynced
  'append.after_rename', // ... and renamed into place, the directory not yet fsynced
  'truncate.before_rename',
  'truncate.after_rename',
  'delete.before_rename',
  'delete.after_rename',
];

// -- errors ---------------------------------------------------------------------------

// An error of the contract: `type` is the spec's error class, `attributes` its fields.
// They go back to the kit as {"id", "error": {"type", "message", ...attributes}}.
class ContractError extends Error {
  constructor(type, message, attributes) {
    super(message);
    this.type = type;
    this.attributes = attributes;
  }
}

function invalidArgument(argument, reason, reasonCode, ruleId = null) {
  return new ContractError('InvalidArgumentError', `${argument} ${reason}`, {
    argument,
    reason,
    reason_code: reasonCode,
    rule_id: ruleId,
  });
}

function conflict(sessionId, expected, actual, kind) {
  return new ContractError('CheckpointConflictError', `expected ${kind} ${expected}, it is ${actual}`, {
    session_id: sessionId,
    expected,
    actual,
    kind,
  });
}

function corrupt(sessionId, location, detail) {
  return new ContractError('CorruptStoreError', `${location}: ${detail}`, {
    session_id: sessionId,
    location,
    detail,
  });
}

function sessionLocked(sessionId, operation) {
  return new ContractError('SessionLockedError', `${sessionId} is held for maintenance`, {
    session_id: sessionId,
    operation,
  });
}

function errorBody(error) {
  if (error instanceof ContractError) {
    return { type: error.type, message: error.message, ...error.attributes };
  }
  // Our own bug: the kit reports it as an exception outside the contract.
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  return { type: (error && error.name) || 'Error', message: String(error && error.message) };
}

// -- arguments: the values are ours to refuse; the kit already checked their types ----

function checkSessionId(id) {
  if (id.length === 0) throw invalidArgument('session_id', 'must not be empty', 'empty', 'ARG-001');
  if ([...id].length > MAX_SESSION_ID) {
    throw invalidArgument('session_id', `is longer than ${MAX_SESSION_ID} characters`, 'too_long', 'ARG-001');
  }
  if (id.includes('\0')) throw invalidArgument('session_id', 'must not contain NUL', 'contains_nul', 'ARG-001');
  return id;
}

function checkSeq(name, value, optional = false) {
  if (optional && (value === undefined || value === null)) return null;
  if (value < 0) throw invalidArgument(name, `must not be negative (got ${value})`, 'negative', 'ARG-002');
  return value;
}

// -- this process, and whether another one is alive --------------------------------

function procStat(pid) {
  // "pid (command) state ppid ..."; the command may hold spaces and parentheses.
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], start: fields[19] };
  } catch {
    return null;
  }
}

const HAS_PROC = procStat(process.pid) !== null;
const BOOT = (() => {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().slice(0, 8);
  } catch {
    return '';
  }
})();

// Who holds a lock: the pid alone could be reused by another process later, so on
// Linux the identity adds the process's start time and the machine's boot id.
const ME = HAS_PROC ? `${process.pid}-${procStat(process.pid).start}-${BOOT}` : `${process.pid}`;

function isAlive(identity) {
  if (identity === ME) return true;
  const [pidText, start, boot] = identity.split('-');
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (boot !== undefined && boot !== BOOT) return false; // from before a restart
  try {
    process.kill(pid, 0); // sends nothing: only asks whether the pid exists
  } catch (error) {
    if (error.code === 'ESRCH') return false;
  }
  if (!HAS_PROC) return true;
  const stat = procStat(pid);
  // A killed process is a zombie until its parent reaps it: dead for our purpose.
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X' && stat.start === start;
}

// -- small file helpers -------------------------------------------------------------

let tempCounter = 0;

// A unique name in `dir`; the identity in it lets the next process remove the file
// once its writer is dead (a kill between write and rename leaves it behind).
function tempName(dir) {
  tempCounter += 1;
  return path.join(dir, `tmp.${ME}.${tempCounter}`);
}

function writeAll(fd, buffer, position = null) {
  let done = 0;
  while (done < buffer.length) {
    try {
      done += fs.writeSync(fd, buffer, done, buffer.length - done, position === null ? null : position + done);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
      sleep(1); // stdout may be a non-blocking pipe that is full
    }
  }
}

function fsyncDirectory(dir) {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function readIfExists(file) {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    if (error.code === 'ENOENT') return null;
    throw error;
  }
}

function unlinkIfExists(file) {
  try {
    fs.unlinkSync(file);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
}

function sleep(ms) {
  // Synchronous: this process does one request at a time and has nothing else to do.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// -- lock files -----------------------------------------------------------------------

// Creates `file` holding `content` in one atomic step, or returns false if it exists.
// Writing it in place after an O_EXCL open would let a reader (or a kill) see it empty.
function createAtomically(file, content, tempDir) {
  const temp = tempName(tempDir);
  fs.writeFileSync(temp, content);
  try {
    fs.linkSync(temp, file);
    return true;
  } catch (error) {
    if (error.code === 'EEXIST') return false;
    throw error;
  } finally {
    fs.unlinkSync(temp);
  }
}

function holderOf(file) {
  const content = readIfExists(file);
  return content === null ? null : content.toString('utf8');
}

// Takes the lock file `file` for this process; false if a live process holds it.
//
// A lock whose holder died must be removed, but "read it, see a dead holder, unlink
// it" races: between our read and our unlink another process may have removed it and
// taken a fresh lock, which we would then remove. So only the process that first
// claims `<file>~<dead holder>` may remove it, and it checks again that the dead
// holder is still the one in the file. That name is used for this holder alone (an
// identity is never reused), so no lock taken later can be removed by mistake; and a
// claimer that dies is itself a dead holder, taken over the same way.
function claim(file, tempDir) {
  for (;;) {
    if (createAtomically(file, ME, tempDir)) return true;
    const holder = holderOf(file);
    if (holder === null) continue; // released while we looked
    if (isAlive(holder)) return false;
    const breaker = `${file}~${holder}`;
    if (!claim(breaker, tempDir)) return false; // someone else is taking it over
    if (holderOf(file) === holder) unlinkIfExists(file);
    unlinkIfExists(breaker);
  }
}

// -- the stdio conversation -----------------------------------------------------------

class Conversation {
  constructor(input = 0, output = 1) {
    this.input = input;
    this.output = output;
    this.pending = Buffer.alloc(0);
    this.current = null; // the id of the request being answered
  }

  // The next line from the kit, or null at end of input (a partial last line is dropped).
  nextLine() {
    const parts = [];
    for (;;) {
      const end = this.pending.indexOf(0x0a);
      if (end >= 0) {
        parts.push(this.pending.subarray(0, end));
        this.pending = this.pending.subarray(end + 1);
        return Buffer.concat(parts).toString('utf8');
      }
      parts.push(this.pending);
      const chunk = Buffer.allocUnsafe(1 << 16);
      const size = this.readSome(chunk);
      if (size === 0) return null;
      this.pending = chunk.subarray(0, size);
    }
  }

  readSome(chunk) {
    for (;;) {
      try {
        return fs.readSync(this.input, chunk, 0, chunk.length, null);
      } catch (error) {
        if (error.code === 'EOF') return 0;
        if (error.code !== 'EAGAIN') throw error;
        sleep(1); // stdin may be non-blocking: wait for the kit
      }
    }
  }

  send(message) {
    writeAll(this.output, Buffer.from(`${JSON.stringify(message)}\n`));
  }
}

// -- the store ------------------------------------------------------------------------

// What one log file holds. `exists` is false for an unknown or deleted session.
function emptyLog(sessionId) {
  return { sessionId, generation: 0, exists: false, batches: [], head: 0, bytes: 0 };
}

class FileBackend {
  constructor(conversation) {
    this.conversation = conversation;
    this.root = null; // the store's directory
    this.opened = false; // until `hello` succeeded
    this.closed = false;
    this.reporting = false; // fault_reports enabled
    this.repairs = []; // what this process repaired since it opened the store
    this.maintained = new Set(); // sessions whose maintenance lock this process holds
  }

  // Answers one request with the method of its name (`resume` comes only inside `fault`).
  handle(request) {
    if (request.op === 'hello') return this.hello(request);
    // The kit's store hooks come instead of hello, alone, on a closed store.
    if (request.op === 'mark_newer_schema' || request.op === 'damage_store') {
      if (this.opened) throw new Error(`${request.op} on an open handle`);
      return this[request.op](request.path);
    }
    if (!this.opened) throw new Error(`the first request must be a successful hello, not ${request.op}`);
    // A closed handle still gets requests: the kit asks us, not itself, what a call
    // after close does (CLOSE-001). Close again is fine (idempotent); all else is refused.
    if (this.closed) {
      if (request.op === 'close') return null;
      throw new ContractError('CheckpointerClosedError', 'the handle is closed', { operation: request.op });
    }
    if (!OPERATIONS.has(request.op)) throw new Error(`unknown op ${JSON.stringify(request.op)}`);
    return this[request.op](request);
  }

  // -- opening --------------------------------------------------------------------------

  // Opens the store at `path` for this handle. After `close` the kit may send another
  // hello, for any store (we declare `reusable`): a closed handle holds nothing, so
  // the process starts afresh, saving Node's start-up for every handle but the first.
  hello(request) {
    if (this.opened && !this.closed) throw new Error('hello on an open handle');
    if (request.protocol !== PROTOCOL) throw new Error(`protocol ${request.protocol}: this backend speaks ${PROTOCOL}`);
    for (const key of Object.keys(request.options || {})) {
      throw invalidArgument('options', `has the unknown option ${JSON.stringify(key)}`, 'unknown_option');
    }
    this.opened = false;
    this.closed = false;
    this.repairs = [];
    this.root = request.path;
    this.sessionsDir = path.join(this.root, 'sessions');
    this.locksDir = path.join(this.root, 'locks');
    this.checkFormat();
    fs.mkdirSync(this.sessionsDir, { recursive: true });
    fs.mkdirSync(this.locksDir, { recursive: true });
    fsyncDirectory(this.root);
    this.removeDeadTemporaries();
    this.cutTornTails();
    this.opened = true;
    return {
      protocol: PROTOCOL,
      capabilities: CAPABILITIES,
      fault_points: FAULT_POINTS,
      reusable: true,
      // main() answers each request before it reads the next: the kit may send
      // several reads at once.
      pipelined: true,
      store_hooks: true,
      name: 'node file backend',
    };
  }

  // Refuses a store written by a newer layout before touching anything (SCHEMA-001).
  checkFormat() {
    const file = path.join(this.root, 'FORMAT');
    if (!fs.existsSync(file)) {
      // Several processes may open a new store at once: the first link() wins.
      createAtomically(file, `${JSON.stringify(FORMAT)}\n`, this.root);
    }
    let found;
    try {
      found = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (error) {
      throw corrupt(null, 'FORMAT', `unreadable: ${error.message}`);
    }
    if (found.format !== FORMAT.format) throw corrupt(null, 'FORMAT', `not a store of this backend: ${found.format}`);
    if (found.version > FORMAT.version) {
      throw new ContractError('SchemaVersionError', `the store has version ${found.version}`, {
        found: found.version,
        supported: FORMAT.version,
      });
    }
  }

  // A process killed between writing a temporary file and renaming it leaves the file.
  removeDeadTemporaries() {
    for (const dir of [this.root, this.sessionsDir, this.locksDir]) {
      for (const name of fs.readdirSync(dir)) {
        const owner = /^tmp\.(.+)\.\d+$/.exec(name);
        if (owner && !isAlive(owner[1])) unlinkIfExists(path.join(dir, name));
      }
    }
  }

  // A batch cut short by a kill is a line without its "\n". Readers ignore it; here it is
  // cut off for good, under the session's lock so that a live writer's line is never cut.
  // A session locked now is skipped: its writer cuts the tail itself before it writes.
  cutTornTails() {
    for (const name of fs.readdirSync(this.sessionsDir)) {
      if (!name.endsWith('.log')) continue;
      const content = readIfExists(path.join(this.sessionsDir, name));
      if (content === null || content.length === 0 || content[content.length - 1] === 0x0a) continue;
      const hash = name.slice(0, -'.log'.length);
      const lock = this.writeLock(hash);
      if (!claim(lock, this.locksDir)) continue;
      try {
        this.loadForWrite(hash, null);
      } finally {
        unlinkIfExists(lock);
      }
    }
  }

  // -- session files ----------------------------------------------------------------------

  logFile(hash) {
    return path.join(this.sessionsDir, `${hash}.log`);
  }

  // Reads a session's log as it is now, without a lock (see the top of the file).
  load(sessionId) {
    const hash = hashOf(sessionId);
    return this.parse(hash, sessionId, readIfExists(this.logFile(hash)));
  }

  // Parses a log file's content; `sessionId` is null when only the hash is known.
  parse(hash, sessionId, content) {
    const log = emptyLog(sessionId);
    if (content === null) return log;
    const location = `sessions/${hash}.log`;
    // Only what ends in "\n" was wholly written; the rest is a batch in progress or torn.
    const complete = content.lastIndexOf(0x0a) + 1;
    log.bytes = complete;
    log.torn = content.length - complete;
    const lines = content.toString('utf8', 0, complete).split('\n');
    lines.pop(); // after the last "\n"
    if (lines.length === 0) throw corrupt(sessionId, location, 'no header');
    let header;
    try {
      header = JSON.parse(lines[0]);
    } catch (error) {
      throw corrupt(sessionId, location, `header: ${error.message}`);
    }
    if (
      typeof header.session_id !== 'string' ||
      hashOf(header.session_id) !== hash ||
      (sessionId !== null && header.session_id !== sessionId)
    ) {
      throw corrupt(sessionId, location, 'the header names another session');
    }
    log.sessionId = header.session_id;
    log.generation = header.generation;
    log.exists = !header.deleted;
    for (let i = 1; i < lines.length; i += 1) {
      const space = lines[i].indexOf(' ');
      const json = lines[i].slice(space + 1);
      if (space < 0 || lines[i].slice(0, space) !== checksum(json)) {
        throw corrupt(log.sessionId, location, `line ${i + 1}: the checksum does not match`);
      }
      let batch;
      try {
        batch = JSON.parse(json);
      } catch (error) {
        throw corrupt(log.sessionId, location, `line ${i + 1}: ${error.message}`);
      }
      if (batch.seq !== log.head + 1 || !Array.isArray(batch.events) || batch.events.length === 0) {
        throw corrupt(log.sessionId, location, `line ${i + 1}: batch at seq ${batch.seq} after head ${log.head}`);
      }
      log.batches.push(batch);
      log.head += batch.events.length;
    }
    return log;
  }

  writeLock(hash) {
    return path.join(this.locksDir, `${hash}.write`);
  }

  // Runs `work` holding the session's write lock: one writer per session at a time,
  // across every process on the store.
  withLock(hash, operation, work) {
    const lock = this.writeLock(hash);
    const started = Date.now();
    for (let pause = 1; !claim(lock, this.locksDir); pause = Math.min(pause * 2, 20)) {
      const waited = Date.now() - started;
      if (waited > BUSY_AFTER_MS) {
        throw new ContractError('StoreBusyError', `the session stayed locked for ${waited} ms`, {
          operation,
          waited_seconds: waited / 1000,
        });
      }
      sleep(pause);
    }
    try {
      return work();
    } finally {
      unlinkIfExists(lock);
    }
  }

  // Reads the log for a writer (who holds the lock), cutting off a torn tail first:
  // a new batch written after it would otherwise turn it into a damaged line.
  loadForWrite(hash, sessionId) {
    const file = this.logFile(hash);
    const content = readIfExists(file);
    const log = this.parse(hash, sessionId, content);
    if (log.torn > 0) {
      this.replace(file, content.subarray(0, log.bytes), null);
      this.repairs.push(`sessions/${hash}.log: cut off ${log.torn} bytes of a batch whose append was interrupted`);
      log.torn = 0;
    }
    return log;
  }

  // Puts `content` in place of `file` so that a crash leaves the old file or the new
  // one: write a temporary file, fsync it, rename it over, fsync the directory.
  replace(file, content, operation) {
    const temp = tempName(this.sessionsDir);
    const fd = fs.openSync(temp, 'w');
    try {
      writeAll(fd, content, 0);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (operation) this.fault(`${operation}.before_rename`);
    fs.renameSync(temp, file);
    if (operation) this.fault(`${operation}.after_rename`);
    fsyncDirectory(this.sessionsDir);
  }

  header(log, deleted = false) {
    const header = { session_id: log.sessionId, generation: log.generation };
    if (deleted) header.deleted = true;
    return `${JSON.stringify(header)}\n`;
  }

  // A write is refused while another live process holds the session for maintenance.
  refuseIfHeld(hash, sessionId, operation) {
    const holder = holderOf(path.join(this.locksDir, `${hash}.maint`));
    if (holder !== null && holder !== ME && isAlive(holder)) throw sessionLocked(sessionId, operation);
  }

  // -- operations -------------------------------------------------------------------------

  append(request) {
    const sessionId = checkSessionId(request.session_id);
    const expectedHead = checkSeq('expected_head', request.expected_head, true);
    const expectedGeneration = checkSeq('expected_generation', request.expected_generation, true);
    const hash = hashOf(sessionId);
    return this.withLock(hash, 'append', () => {
      this.refuseIfHeld(hash, sessionId, 'append');
      const log = this.loadForWrite(hash, sessionId);
      this.checkExpectations(log, expectedHead, expectedGeneration);
      const events = request.events;
      if (events.length === 0) return log.head; // an empty batch writes nothing (APPEND-001)
      const batch = batchLine({ seq: log.head + 1, ts: new Date().toISOString(), events });
      if (log.exists) {
        this.appendInPlace(this.logFile(hash), Buffer.from(batch), log.bytes);
      } else {
        // A new (or deleted) session: its file appears whole, header and first batch.
        this.replace(this.logFile(hash), Buffer.from(this.header(log) + batch), 'append');
      }
      return log.head + events.length;
    });
  }

  appendInPlace(file, batch, offset) {
    const fd = fs.openSync(file, 'r+');
    try {
      this.fault('append.before_write');
      writeAll(fd, batch, offset); // one write: a kill leaves a prefix of this line at most
      this.fault('append.after_write');
      fs.fsyncSync(fd);
      this.fault('append.after_fsync');
    } finally {
      fs.closeSync(fd);
    }
  }

  // GEN-002 before APPEND-002 / TRUNC-003, as the contract orders them.
  checkExpectations(log, expectedHead, expectedGeneration) {
    if (expectedGeneration !== null && expectedGeneration !== log.generation) {
      throw conflict(log.sessionId, expectedGeneration, log.generation, 'generation');
    }
    if (expectedHead !== null && expectedHead !== log.head) {
      throw conflict(log.sessionId, expectedHead, log.head, 'head');
    }
  }

  read(request) {
    const sessionId = checkSessionId(request.session_id);
    const since = checkSeq('since_seq', request.since_seq);
    // Take the whole snapshot before sending any of it: an error must be the only reply.
    const log = this.load(sessionId);
    const stored = [];
    for (const batch of log.batches) {
      batch.events.forEach((event, i) => {
        const seq = batch.seq + i;
        if (seq > since) {
          stored.push({ seq, session_id: sessionId, parent_seq: seq === 1 ? null : seq - 1, ts: batch.ts, event });
        }
      });
    }
    for (let start = 0; start < stored.length; start += READ_CHUNK) {
      this.conversation.send({ id: this.conversation.current, events: stored.slice(start, start + READ_CHUNK) });
    }
    return { count: stored.length };
  }

  head(request) {
    return this.load(checkSessionId(request.session_id)).head;
  }

  generation(request) {
    return this.load(checkSessionId(request.session_id)).generation;
  }

  list_sessions() {
    const sessions = [];
    for (const name of fs.readdirSync(this.sessionsDir)) {
      if (!name.endsWith('.log')) continue;
      const file = path.join(this.sessionsDir, name);
      let fd;
      try {
        fd = fs.openSync(file, 'r');
      } catch (error) {
        if (error.code === 'ENOENT') continue; // replaced while we listed
        throw error;
      }
      try {
        const header = JSON.parse(firstLine(fd));
        if (!header.deleted) sessions.push({ id: header.session_id, mtime: fs.fstatSync(fd).mtimeMs / 1000 });
      } finally {
        fs.closeSync(fd);
      }
    }
    // Most recently modified first, ties by id in code point order (as Python compares
    // strings; JavaScript's `<` compares UTF-16 units, which orders astral characters
    // before U+E000..U+FFFF).
    return sessions.sort((a, b) => b.mtime - a.mtime || compareCodePoints(a.id, b.id));
  }

  delete(request) {
    const sessionId = checkSessionId(request.session_id);
    const hash = hashOf(sessionId);
    this.withLock(hash, 'delete', () => {
      this.refuseIfHeld(hash, sessionId, 'delete');
      const log = this.loadForWrite(hash, sessionId);
      if (!log.exists) return; // deleting an unknown session does nothing
      // The file stays, as a header that says "deleted": the generation outlives the log (GEN-001).
      log.generation += 1;
      this.replace(this.logFile(hash), Buffer.from(this.header(log, true)), 'delete');
    });
    return null;
  }

  truncate(request) {
    const sessionId = checkSessionId(request.session_id);
    const toSeq = checkSeq('to_seq', request.to_seq);
    const expectedHead = checkSeq('expected_head', request.expected_head, true);
    const expectedGeneration = checkSeq('expected_generation', request.expected_generation, true);
    const hash = hashOf(sessionId);
    return this.withLock(hash, 'truncate', () => {
      this.refuseIfHeld(hash, sessionId, 'truncate');
      const log = this.loadForWrite(hash, sessionId);
      this.checkExpectations(log, expectedHead, expectedGeneration);
      if (toSeq > log.head) {
        throw invalidArgument('to_seq', `${toSeq} is beyond the head ${log.head}`, 'beyond_head', 'TRUNC-002');
      }
      if (toSeq === log.head) return toSeq; // removes nothing, writes nothing (TRUNC-005)
      log.generation += 1;
      let content = this.header(log);
      for (const batch of log.batches) {
        if (batch.seq > toSeq) break;
        const kept = batch.events.slice(0, toSeq - batch.seq + 1); // the last batch kept may be cut
        content += batchLine({ seq: batch.seq, ts: batch.ts, events: kept });
      }
      this.replace(this.logFile(hash), Buffer.from(content), 'truncate');
      return toSeq;
    });
  }

  // Not reentrant: a second acquire, even by the holder, is refused (MAINT-003).
  acquire_maintenance(request) {
    const sessionId = checkSessionId(request.session_id);
    const hash = hashOf(sessionId);
    // Under the write lock, so that no write that checked the lock before is still running.
    this.withLock(hash, 'acquire_maintenance', () => {
      if (!claim(path.join(this.locksDir, `${hash}.maint`), this.locksDir)) {
        throw sessionLocked(sessionId, 'acquire_maintenance');
      }
      this.maintained.add(hash);
    });
    return null;
  }

  release_maintenance(request) {
    const hash = hashOf(checkSessionId(request.session_id));
    if (this.maintained.delete(hash)) unlinkIfExists(path.join(this.locksDir, `${hash}.maint`));
    return null;
  }

  check_integrity() {
    const problems = [];
    let sessions = 0;
    for (const name of fs.readdirSync(this.sessionsDir)) {
      if (!name.endsWith('.log')) continue;
      try {
        const log = this.parse(name.slice(0, -'.log'.length), null, readIfExists(path.join(this.sessionsDir, name)));
        sessions += log.exists ? 1 : 0;
      } catch (error) {
        if (!(error instanceof ContractError)) throw error;
        problems.push(error.message);
      }
    }
    const detail = problems.length ? `${problems.length} damaged log(s): ${problems.join('; ')}` : `${sessions} session(s), all readable`;
    return { ok: problems.length === 0, detail, problems, repairs: this.repairs };
  }

  // -- store hooks: the kit ages or damages a closed store to check SCHEMA-001, INTEG-002 --

  mark_newer_schema(root) {
    const newer = `${JSON.stringify({ ...FORMAT, version: FORMAT.version + 1 })}\n`;
    const temp = tempName(root);
    fs.writeFileSync(temp, newer);
    fs.renameSync(temp, path.join(root, 'FORMAT'));
    return null;
  }

  // Flips the case of one letter inside the first stored batch: its checksum no longer
  // matches, so reads of the session raise CorruptStoreError and check_integrity says so.
  damage_store(root) {
    const dir = path.join(root, 'sessions');
    for (const name of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
      if (!name.endsWith('.log')) continue;
      const file = path.join(dir, name);
      const content = fs.readFileSync(file);
      const batchStart = content.indexOf(0x0a) + 1; // after the header
      const eventsAt = content.indexOf('"events"', batchStart);
      if (batchStart === 0 || eventsAt < 0) continue;
      for (let i = eventsAt + '"events"'.length; i < content.length; i += 1) {
        const isLetter = (content[i] | 0x20) >= 0x61 && (content[i] | 0x20) <= 0x7a;
        if (isLetter) {
          content[i] ^= 0x20;
          fs.writeFileSync(file, content);
          return `flipped the case of byte ${i} of sessions/${name}, inside its first checksummed batch`;
        }
      }
    }
    throw new Error('no stored batch to damage');
  }

  fault_reports(request) {
    this.reporting = request.enabled;
    return null;
  }

  // Gives back everything the handle holds: the process may serve another one next.
  close() {
    this.releaseAll();
    this.reporting = false;
    this.closed = true;
    return null;
  }

  releaseAll() {
    for (const hash of this.maintained) unlinkIfExists(path.join(this.locksDir, `${hash}.maint`));
    this.maintained.clear();
  }

  // Reports a fault point and waits for the kit's resume; the kit may kill us instead.
  fault(point) {
    if (!this.reporting) return;
    const id = this.conversation.current;
    this.conversation.send({ id, fault: point });
    const line = this.conversation.nextLine();
    const message = line === null ? null : JSON.parse(line);
    if (message === null || message.op !== 'resume' || message.id !== id) {
      // The kit is gone (or broke the protocol): stop as if killed here, holding what we hold.
      process.stderr.write(`expected resume of ${id} at ${point}, got ${line}\n`);
      process.exit(3);
    }
  }
}

// The requests answered by a method of the same name (an allow-list: `request.op` is
// the kit's text, and must not reach any other method).
const OPERATIONS = new Set([
  'append',
  'read',
  'head',
  'list_sessions',
  'delete',
  'truncate',
  'generation',
  'acquire_maintenance',
  'release_maintenance',
  'check_integrity',
  'fault_reports',
  'close',
]);

// One batch as a line of the log: a checksum of its JSON, a space, the JSON.
function batchLine(batch) {
  const json = JSON.stringify(batch);
  return `${checksum(json)} ${json}\n`;
}

function checksum(text) {
  return crypto.createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 16);
}

function hashOf(sessionId) {
  return crypto.createHash('sha256').update(sessionId, 'utf8').digest('hex');
}

function firstLine(fd) {
  const parts = [];
  const chunk = Buffer.allocUnsafe(4096);
  for (let position = 0; ; ) {
    const size = fs.readSync(fd, chunk, 0, chunk.length, position);
    const end = chunk.subarray(0, size).indexOf(0x0a);
    if (end >= 0 || size === 0) {
      parts.push(chunk.subarray(0, end >= 0 ? end : size));
      return Buffer.concat(parts).toString('utf8');
    }
    parts.push(Buffer.from(chunk.subarray(0, size)));
    position += size;
  }
}

function compareCodePoints(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    if (x[i] !== y[i]) return x[i].codePointAt(0) - y[i].codePointAt(0);
  }
  return x.length - y.length;
}

// -- the loop: one request at a time, in order ----------------------------------------

function main(Backend = FileBackend) {
  const conversation = new Conversation();
  const backend = new Backend(conversation);
  for (let line = conversation.nextLine(); line !== null; line = conversation.nextLine()) {
    const request = JSON.parse(line);
    conversation.current = request.id;
    let reply;
    try {
      const result = backend.handle(request);
      reply = { id: request.id, result: result === undefined ? null : result };
    } catch (error) {
      reply = { id: request.id, error: errorBody(error) };
    }
    conversation.send(reply);
  }
  // stdin ended: the kit closed the handle (or died). Give back the maintenance locks.
  if (backend.opened) backend.releaseAll();
}

module.exports = { FileBackend, main };

if (require.main === module) main();
