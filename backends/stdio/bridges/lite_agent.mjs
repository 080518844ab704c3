#!/usr/bin/env node
// The lite-agent bridge: serves a checkpointer written for the lite-agent SDK's
// `Checkpointer` interface over checkpointspec's stdio protocol (docs/stdio-protocol.md),
// so that the kit checks it without an adapter of the author's own (docs/lite-agent.md).
// Node.js 20+, standard library only.
//
//   node lite_agent.mjs MODULE[#FACTORY] [--declare durable,multi_process,...]
//   node lite_agent.mjs MODULE[#FACTORY] [--declare ...] --describe [--option KEY=VALUE ...]
//
// `checkpointspec run --lite-agent MODULE#FACTORY` starts this file; `--describe` prints,
// as one JSON line, what the bridge finds on the factory's object and what was declared.
//
// What this file owns: importing the author's module, calling the factory with the
// store's path and the options, calling the interface exactly as the SDK does, and
// translating in both directions — requests to calls, kit events to lite-agent
// SessionEvents (EVENT_TABLE below), stored events and thrown errors to replies. It
// checks nothing itself: every argument value, conflict and closed handle is the
// checkpointer's to refuse, so that the kit sees the checkpointer, not the bridge.
// What it must answer because the object lacks a method (close, checkIntegrity, an
// optional operation) it names in its hello (`emulated`, ANSWERED_WITHOUT below).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const PROTOCOL = 1;
const READ_CHUNK = 500; // stored events per `events` line of a read

// What `--declare` may name: what the bridge cannot see on the object.
const DECLARABLE = {
  durable: 'acknowledged writes survive close, reopen, a killed process and a power loss',
  multi_process: 'several processes may use one store at once',
  truncate_without_expected_head:
    'truncate(sessionId, toSeq) takes no expectedHead: the bridge drops it, and TRUNC-003 is expected to fail',
};

// The requests the bridge answers itself when the object lacks the method: it says so in
// its hello (`emulated`), and the kit reports a rule whose only evidence is such an
// answer checked by the kit, not passed. `generation` the interface never has.
const ANSWERED_WITHOUT = {
  close: 'close',
  check_integrity: 'checkIntegrity',
  list_sessions: 'list',
  delete: 'delete',
  truncate: 'truncate',
  acquire_maintenance: 'acquireMaintenance',
  release_maintenance: 'releaseMaintenance',
};

/** The hello's `emulated`: each request the bridge answers itself, with why. */
function emulatedFor(checkpointer) {
  const emulated = {};
  for (const [op, method] of Object.entries(ANSWERED_WITHOUT)) {
    if (typeof checkpointer[method] !== 'function') {
      emulated[op] = `the lite-agent bridge answers ${method}() itself: the checkpointer has none`;
    }
  }
  emulated.generation = 'the lite-agent bridge answers generation itself: the lite-agent interface has none';
  return emulated;
}

// The options the bridge keeps for itself; every other `--option` goes to the factory.
//   path_as=dir          -> factory({ dir: <store path> })            (the default)
//   path_as=file:NAME    -> factory({ file: <store path>/NAME })
const DEFAULT_PATH_AS = 'dir';

/** What the bridge itself refuses (arguments, a factory it cannot serve): its message
 *  says all, so no stack is printed with it. */
class SetupError extends Error {}

// -- the factory -----------------------------------------------------------------------------

function parseTarget(spec) {
  const hash = spec.lastIndexOf('#');
  const modulePath = hash < 0 ? spec : spec.slice(0, hash);
  const factoryName = hash < 0 ? 'default' : spec.slice(hash + 1);
  if (!modulePath || !factoryName) throw new SetupError(`${spec}: expected MODULE#FACTORY`);
  return { modulePath, factoryName };
}

/** The module `modulePath` names: a path from the kit's working directory, or a package. */
async function importModule(modulePath) {
  const isPath = modulePath.startsWith('.') || isAbsolute(modulePath);
  const url = isPath ? pathToFileURL(resolve(process.cwd(), modulePath)).href : modulePath;
  return import(url).catch((error) => {
    if (error?.code === 'ERR_MODULE_NOT_FOUND') throw new SetupError(error.message);
    throw error;
  });
}

async function loadFactory({ modulePath, factoryName }) {
  const mod = await importModule(modulePath);
  // A CommonJS module's exports are the ESM namespace's `default`.
  const factory = mod[factoryName] ?? mod.default?.[factoryName];
  if (typeof factory !== 'function') {
    const names = [...new Set([...Object.keys(mod), ...Object.keys(mod.default ?? {})])];
    throw new SetupError(`${modulePath} exports no function ${factoryName} (it exports: ${names.join(', ') || 'nothing'})`);
  }
  return factory;
}

/**
 * The store hooks (SCHEMA-001, INTEG-002), when the module gives both: functions
 * `markNewerSchema(options)` and `damageStore(options)`, properties of the factory or
 * exports of its module, called with the factory's argument for a closed store. The
 * first makes the store look written by a newer, incompatible format; the second
 * damages stored event data in a way the checkpointer promises to detect and returns
 * a string saying what it damaged.
 */
async function loadHooks({ modulePath }, factory) {
  const mod = await importModule(modulePath); // imported once already: the same namespace
  const find = (name) => factory[name] ?? mod[name] ?? mod.default?.[name];
  const markNewerSchema = find('markNewerSchema');
  const damageStore = find('damageStore');
  const given = [markNewerSchema, damageStore].filter((hook) => typeof hook === 'function').length;
  if (given === 1) {
    throw new SetupError('give both store hooks, markNewerSchema(options) and damageStore(options), or neither');
  }
  return given === 2 ? { markNewerSchema, damageStore } : null;
}

/** An option's string as the factory gets it: true/false/null and numbers as JSON reads
 *  them, `str:` to keep a string that would otherwise become one of those. */
function optionValue(text) {
  if (text.startsWith('str:')) return text.slice(4);
  if (text === 'true' || text === 'false' || text === 'null') return JSON.parse(text);
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
  return text;
}

/** The factory's argument: the store's path under the key `path_as` names, and the rest. */
function factoryOptions(storePath, options) {
  const { path_as: pathAs = DEFAULT_PATH_AS, ...rest } = options;
  const [key, fileName] = pathAs.split(':', 2);
  if (!key) throw typedError('InvalidArgumentError', `path_as=${pathAs}: expected KEY or KEY:FILENAME`, { argument: 'options', reason: 'path_as names no key', reason_code: 'bad_option' });
  if (key in rest) throw typedError('InvalidArgumentError', `option ${key} is where the store's path goes (path_as): the kit gives each store its own path`, { argument: 'options', reason: `${key} is set by path_as`, reason_code: 'bad_option' });
  const argument = { [key]: fileName ? join(storePath, fileName) : storePath };
  for (const [name, value] of Object.entries(rest)) argument[name] = optionValue(value);
  return argument;
}

/**
 * The store files the checkpointer rebuilds on open, which a crash check need not
 * judge (the hello's `scratch_files`): its `scratchFiles()` (or a `scratchFiles`
 * object), `{ 'glob pattern': 'why' }`, relative to the store's directory.
 */
function scratchFilesOf(checkpointer) {
  const given = typeof checkpointer.scratchFiles === 'function' ? checkpointer.scratchFiles() : checkpointer.scratchFiles;
  if (given === undefined) return {};
  const entries = given !== null && typeof given === 'object' && !Array.isArray(given) ? Object.entries(given) : null;
  if (!entries || entries.some(([, why]) => typeof why !== 'string')) {
    throw new SetupError("scratchFiles must be { 'glob pattern': 'why the store rebuilds it on open' }");
  }
  return Object.fromEntries(entries);
}

/** What the bridge sees on the object and what it was told: the hello's capabilities. */
function capabilitiesOf(checkpointer, declared) {
  const has = (name) => typeof checkpointer[name] === 'function';
  const missing = ['append', 'read', 'head'].filter((name) => !has(name));
  if (missing.length) throw new SetupError(`the factory's object is not a Checkpointer: it has no ${missing.join(', ')}`);
  const found = [];
  if (has('delete')) found.push('delete');
  if (has('list')) found.push('list');
  if (has('truncate')) found.push('truncate');
  if (has('acquireMaintenance') && has('releaseMaintenance')) found.push('maintenance');
  const methods = ['checkIntegrity', 'close'].filter(has);
  // `length` counts the parameters before the first default: a truncate written
  // (sessionId, toSeq, expectedHead = undefined) looks like one without; declaring
  // settles it either way, and an undeclared short truncate is refused, not guessed.
  const truncateTakesExpectedHead = has('truncate') && checkpointer.truncate.length >= 3;
  if (has('truncate') && !truncateTakesExpectedHead && !declared.includes('truncate_without_expected_head')) {
    throw new SetupError(
      `truncate takes ${checkpointer.truncate.length} parameters, not (sessionId, toSeq, expectedHead): ` +
        'declare truncate_without_expected_head (--declare) if it has none, or give it the parameter ' +
        'without a default value',
    );
  }
  const capabilities = [...found, ...declared.filter((d) => d === 'durable' || d === 'multi_process')];
  return {
    found,
    methods,
    declared,
    capabilities,
    emulated: emulatedFor(checkpointer),
    scratchFiles: scratchFilesOf(checkpointer),
  };
}

// -- events: the kit's kinds as lite-agent SessionEvents ---------------------------------------
//
// EVENT_TABLE (docs/lite-agent.md#events): each kit event kind, the SessionEvent it is
// carried as, and back. Every kit event comes back equal (EVENT-001): fields the kit
// has no use for (`turn`) are written as 0 and dropped on the way back, and what the
// SDK keeps only as text (a background completion, a reminder, a repair) is a user
// message whose last content block is a `native` block naming the kind.

const MARKER = 'checkpointspec';

function nativeMarker(kind, data = {}) {
  return { type: 'native', provider: MARKER, data: { kind, ...data } };
}

function userMessage(content) {
  return { type: 'user', message: { role: 'user', content } };
}

function text(value) {
  return { type: 'text', text: value };
}

const TO_SDK = {
  user_prompt: (e) =>
    // A prompt without blocks is string content: the form the SDK lists as a checkpoint.
    userMessage((e.blocks ?? []).length ? [text(e.text), ...e.blocks.map(text)] : e.text),
  assistant_message: (e) => ({
    type: 'assistant',
    message: {
      role: 'assistant',
      // `input` keeps the arguments' JSON text as it is: parsing it would lose its spelling.
      content: [text(e.text), ...(e.tool_calls ?? []).map((c) => ({ type: 'tool_call', id: c.id, name: c.name, input: c.arguments }))],
    },
  }),
  tool_started: (e) => ({ type: 'tool_started', id: e.tool_call_id, name: e.name, turn: 0 }),
  tool_result: (e) => ({
    type: 'tool_result',
    result: { type: 'tool_result', id: e.tool_call_id, content: e.content, isError: e.is_error ?? false },
    turn: 0,
  }),
  file_snapshot: (e) => ({
    type: 'file_snapshot',
    path: e.path,
    before: e.content_before,
    truncated: e.truncated ?? false,
    encoding: (e.encoding ?? 'utf-8') === 'utf-8' ? 'utf8' : 'base64',
    turn: 0,
    ...(e.hash_after == null ? {} : { hashAfter: e.hash_after }),
    ...(e.tool_call_id == null ? {} : { toolCallId: e.tool_call_id }),
  }),
  summary: (e) => ({
    type: 'summary',
    messages: [{ role: 'user', content: e.text }],
    throughSeq: e.through_seq,
    before: e.tokens_before,
    after: e.tokens_after,
  }),
  background_completion: (e) => userMessage([text(e.content), nativeMarker('background_completion', { taskId: e.task_id })]),
  runtime_reminder: (e) => userMessage([text(e.text), nativeMarker('runtime_reminder')]),
  repair_message: (e) =>
    userMessage([text(e.text), nativeMarker('repair_message', e.tool_call_id == null ? {} : { toolCallId: e.tool_call_id })]),
};

function toSdk(event) {
  const convert = TO_SDK[event.type];
  if (!convert) throw new Error(`the kit sent an event of type ${event.type}, which the bridge has no table row for`);
  return convert(event);
}

function fromUser(message) {
  const { content } = message;
  if (typeof content === 'string') return { type: 'user_prompt', text: content, blocks: [] };
  const last = content[content.length - 1];
  if (last?.type === 'native' && last.provider === MARKER) {
    const body = content[0]?.text;
    const { kind, taskId, toolCallId } = last.data;
    if (kind === 'background_completion') return { type: kind, task_id: taskId, content: body };
    if (kind === 'runtime_reminder') return { type: kind, text: body };
    if (kind === 'repair_message') return { type: kind, text: body, tool_call_id: toolCallId ?? null };
  }
  return { type: 'user_prompt', text: content[0]?.text ?? '', blocks: content.slice(1).map((b) => b.text) };
}

function fromSdk(event) {
  switch (event?.type) {
    case 'user':
      return fromUser(event.message);
    case 'assistant': {
      const [first, ...calls] = event.message.content;
      return {
        type: 'assistant_message',
        text: first?.text ?? '',
        tool_calls: calls.map((c) => ({ id: c.id, name: c.name, arguments: c.input })),
      };
    }
    case 'tool_started':
      return { type: 'tool_started', tool_call_id: event.id, name: event.name };
    case 'tool_result':
      return { type: 'tool_result', tool_call_id: event.result.id, content: event.result.content, is_error: event.result.isError ?? false };
    case 'file_snapshot':
      return {
        type: 'file_snapshot',
        path: event.path,
        content_before: event.before,
        truncated: event.truncated ?? false,
        encoding: event.encoding === 'base64' ? 'base64' : 'utf-8',
        hash_after: event.hashAfter ?? null,
        tool_call_id: event.toolCallId ?? null,
      };
    case 'summary':
      return {
        type: 'summary',
        text: event.messages.map((m) => (typeof m.content === 'string' ? m.content : '')).join(''),
        through_seq: event.throughSeq,
        tokens_before: event.before,
        tokens_after: event.after,
      };
    default:
      // Not a kind the kit writes: passed on as stored, for the kit to report.
      return event;
  }
}

function storedToWire(stored) {
  return {
    seq: stored.seq,
    session_id: stored.sessionId,
    parent_seq: stored.parentSeq ?? null,
    ts: stored.ts,
    event: fromSdk(stored.event),
  };
}

// -- errors: thrown by class name and documented properties ---------------------------------

// Each typed error of the protocol: its properties as an author's error class names them
// (camelCase), and the reply field each becomes. Required ones first; `?` marks optional.
const ERROR_PROPERTIES = {
  CheckpointConflictError: { sessionId: 'session_id', expected: 'expected', actual: 'actual', 'kind?': 'kind' },
  InvalidArgumentError: { argument: 'argument', reason: 'reason', 'reasonCode?': 'reason_code', 'ruleId?': 'rule_id' },
  UnsupportedOperationError: { operation: 'operation', capability: 'capability' },
  CheckpointerClosedError: { operation: 'operation' },
  CorruptStoreError: { location: 'location', detail: 'detail', 'sessionId?': 'session_id' },
  SchemaVersionError: { found: 'found', supported: 'supported' },
  StoreBusyError: { operation: 'operation', waitedSeconds: 'waited_seconds' },
  SessionLockedError: { sessionId: 'session_id', operation: 'operation' },
};

// The interface's parameter names, as an InvalidArgumentError's `argument`, and the
// protocol's names for them.
const ARGUMENT_NAMES = { sessionId: 'session_id', sinceSeq: 'since_seq', toSeq: 'to_seq', expectedHead: 'expected_head' };

function typedError(type, message, fields) {
  return Object.assign(new Error(message), { bridgeReply: { type, message, ...fields } });
}

/** The error reply for anything thrown: a typed error when its class is one of the
 *  protocol's and it carries the required properties, else untyped, with its stack. */
function errorReply(error) {
  if (error?.bridgeReply) return error.bridgeReply;
  const name = typeof error?.name === 'string' && error.name !== 'Error' ? error.name : error?.constructor?.name;
  const properties = ERROR_PROPERTIES[name];
  const message = String(error?.message ?? error);
  if (properties) {
    const reply = { type: name, message };
    const lacking = [];
    for (const [property, field] of Object.entries(properties)) {
      const optional = property.endsWith('?');
      const key = optional ? property.slice(0, -1) : property;
      const value = error[key] ?? error[field];
      if (value !== undefined && value !== null) reply[field] = value;
      else if (!optional) lacking.push(key);
    }
    // An argument is named as the interface names it; the protocol names it in snake_case.
    if (typeof reply.argument === 'string') reply.argument = ARGUMENT_NAMES[reply.argument] ?? reply.argument;
    if (!lacking.length) return reply;
    return { type: `${name} without ${lacking.join(', ')}`, message: `${message}\n${error.stack ?? ''}` };
  }
  return { type: name || typeof error, message: `${message}\n${error?.stack ?? ''}` };
}

// -- one handle ----------------------------------------------------------------------------

class Handle {
  constructor(factory, declared, send) {
    this.factory = factory;
    this.declared = declared;
    this.send = send;
    this.checkpointer = null;
    this.closed = false;
  }

  async open(storePath, options) {
    const checkpointer = await this.factory(factoryOptions(storePath, options));
    const seen = capabilitiesOf(checkpointer ?? {}, this.declared);
    this.checkpointer = checkpointer;
    this.closed = false;
    return seen;
  }

  /** Calls on a closed handle go to the checkpointer if it has close() (its refusal is
   *  what the kit checks, CLOSE-001); one without close() is closed by the bridge. */
  closedByTheBridge(op) {
    if (this.closed && typeof this.checkpointer.close !== 'function') {
      throw typedError('CheckpointerClosedError', `${op} on a closed handle`, { operation: op });
    }
  }

  /** A call the bridge answers itself, the object lacking the method: on a closed handle
   *  that is CheckpointerClosedError, which the contract checks before the capability. */
  refusedByTheBridge(op) {
    if (this.closed) throw typedError('CheckpointerClosedError', `${op} on a closed handle`, { operation: op });
  }

  unsupported(op, method, capability) {
    if (typeof this.checkpointer[method] !== 'function') {
      this.refusedByTheBridge(op);
      throw typedError('UnsupportedOperationError', `the checkpointer has no ${method}()`, { operation: op, capability });
    }
  }

  async call(request) {
    const cp = this.checkpointer;
    const { op } = request;
    if (op === 'close') {
      this.closed = true;
      if (typeof cp.close === 'function') await cp.close();
      return null;
    }
    if (op === 'fault_reports') return null; // the bridge names no fault points
    this.closedByTheBridge(op);
    const sid = request.session_id;
    switch (op) {
      case 'append':
        return await cp.append(sid, request.events.map(toSdk), request.expected_head ?? undefined);
      case 'read':
        return await this.read(request);
      case 'head':
        return await cp.head(sid);
      case 'list_sessions': {
        this.unsupported(op, 'list', 'list');
        // The SDK's mtime is milliseconds since the epoch; the protocol's is seconds.
        return (await cp.list()).map((info) => ({ id: info.id, mtime: info.mtime / 1000 }));
      }
      case 'delete':
        this.unsupported(op, 'delete', 'delete');
        await cp.delete(sid);
        return null;
      case 'truncate': {
        this.unsupported(op, 'truncate', 'truncate');
        const withoutExpectedHead = this.declared.includes('truncate_without_expected_head');
        if (withoutExpectedHead) await cp.truncate(sid, request.to_seq);
        else await cp.truncate(sid, request.to_seq, request.expected_head ?? undefined);
        return request.to_seq;
      }
      case 'acquire_maintenance':
        this.unsupported(op, 'acquireMaintenance', 'maintenance');
        await cp.acquireMaintenance(sid);
        return null;
      case 'release_maintenance':
        this.unsupported(op, 'releaseMaintenance', 'maintenance');
        await cp.releaseMaintenance(sid);
        return null;
      case 'generation':
        this.refusedByTheBridge(op);
        throw typedError('UnsupportedOperationError', 'the lite-agent interface has no generation', { operation: op, capability: 'generation' });
      case 'check_integrity':
        return await this.checkIntegrity();
      default:
        throw new Error(`the bridge does not know the request ${op}`);
    }
  }

  async read(request) {
    let events = this.checkpointer.read(request.session_id, { sinceSeq: request.since_seq ?? 0 });
    if (typeof events?.then === 'function') events = await events;
    // A read is one snapshot: every event is taken before the first is sent.
    const stored = [];
    for await (const event of events) stored.push(storedToWire(event));
    for (let i = 0; i < stored.length; i += READ_CHUNK) {
      this.send({ id: request.id, events: stored.slice(i, i + READ_CHUNK) });
    }
    return { count: stored.length };
  }

  async checkIntegrity() {
    if (typeof this.checkpointer.checkIntegrity !== 'function') {
      this.refusedByTheBridge('check_integrity');
      return { ok: true, detail: 'the checkpointer has no checkIntegrity(): nothing was checked', problems: [], repairs: [] };
    }
    const found = await this.checkpointer.checkIntegrity();
    const ok = Boolean(found?.ok);
    const detail = String(found?.detail ?? '');
    const problems = found?.problems ?? (ok ? [] : [detail]);
    return { ok, detail, problems, repairs: found?.repairs ?? [] };
  }
}

// -- the process ---------------------------------------------------------------------------

function parseArguments(argv) {
  const [spec, ...rest] = argv;
  if (!spec || spec.startsWith('--')) throw new SetupError('usage: lite_agent.mjs MODULE[#FACTORY] [--declare a,b] [--describe [--option K=V ...]]');
  const declared = [];
  const options = {};
  let describe = false;
  for (let i = 0; i < rest.length; i++) {
    const flag = rest[i];
    if (flag === '--describe') describe = true;
    else if (flag === '--declare') declared.push(...(rest[++i] ?? '').split(',').filter(Boolean));
    else if (flag === '--option') {
      const [key, ...value] = (rest[++i] ?? '').split('=');
      options[key] = value.join('=');
    } else throw new SetupError(`unknown argument ${flag}`);
  }
  const unknown = declared.filter((d) => !(d in DECLARABLE));
  if (unknown.length) {
    const why = unknown.includes('codec') ? ' (a codec is a Python object: it cannot reach another process)' : '';
    throw new SetupError(`--declare ${unknown.join(',')}: not declarable${why}; declarable: ${Object.keys(DECLARABLE).join(', ')}`);
  }
  return { target: parseTarget(spec), declared: [...new Set(declared)], options, describe };
}

/** `--describe`: open one handle on a scratch directory, print what was found, close it. */
async function describe({ target, declared, options }) {
  const scratch = mkdtempSync(join(tmpdir(), 'lite-agent-describe-'));
  try {
    const factory = await loadFactory(target);
    const storeHooks = (await loadHooks(target, factory)) !== null;
    const handle = new Handle(factory, declared, () => {});
    const seen = await handle.open(scratch, options);
    await handle.call({ op: 'close', id: 0 });
    const described = { module: target.modulePath, factory: target.factoryName, ...seen, storeHooks };
    process.stdout.write(JSON.stringify(described) + '\n');
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function serve({ target, declared }) {
  const send = (reply) => process.stdout.write(JSON.stringify(reply) + '\n');
  const factory = await loadFactory(target);
  const hooks = await loadHooks(target, factory);
  const handle = new Handle(factory, declared, send);
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const request = JSON.parse(line);
    try {
      if (request.op === 'hello') {
        if (request.protocol !== PROTOCOL) throw new Error(`protocol ${request.protocol}: this bridge speaks ${PROTOCOL}`);
        const seen = await handle.open(request.path, request.options ?? {});
        const name = `lite-agent ${target.factoryName} (${target.modulePath})`;
        const { capabilities, emulated, scratchFiles } = seen;
        // Each request is answered before the next line is taken: pipelined.
        const result = { protocol: PROTOCOL, capabilities, name, reusable: true, emulated, pipelined: true };
        send({ id: request.id, result: { ...result, scratch_files: scratchFiles, store_hooks: hooks !== null } });
      } else if (request.op === 'mark_newer_schema' || request.op === 'damage_store') {
        // A process's only request, on a closed store: the module's own hook does it.
        if (request.protocol !== PROTOCOL) throw new Error(`protocol ${request.protocol}: this bridge speaks ${PROTOCOL}`);
        if (!hooks) throw new Error(`${request.op}: the module gives no store hooks (markNewerSchema, damageStore)`);
        const hook = request.op === 'mark_newer_schema' ? hooks.markNewerSchema : hooks.damageStore;
        const done = await hook(factoryOptions(request.path, request.options ?? {}));
        send({ id: request.id, result: request.op === 'damage_store' ? String(done ?? 'damaged') : null });
      } else {
        if (!handle.checkpointer) throw new Error(`the first request must be a successful hello, not ${request.op}`);
        send({ id: request.id, result: (await handle.call(request)) ?? null });
      }
    } catch (error) {
      send({ id: request.id, error: errorReply(error) });
    }
  }
  // stdin ended: a parent that closed the handle has sent close; one that died has not.
  if (handle.checkpointer && !handle.closed && typeof handle.checkpointer.close === 'function') {
    await handle.checkpointer.close();
  }
}

try {
  const settings = parseArguments(process.argv.slice(2));
  await (settings.describe ? describe(settings) : serve(settings));
} catch (error) {
  // The module, the factory or the arguments: nothing was served. An error of the
  // author's code (an import that fails, a factory that throws) comes with its stack.
  const stack = error instanceof SetupError ? '' : `\n${error?.stack ?? ''}`;
  process.stderr.write(`lite_agent.mjs: ${error?.message ?? error}${stack}\n`);
  process.exit(2);
}
