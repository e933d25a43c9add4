import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HandlerConfig } from '../../src/config/types.js';
import { ConfigError } from '../../src/errors.js';
import { redactor } from '../../src/redact.js';
import { createHandler, createModuleHandler } from '../../src/runner/handlers/index.js';
import { HandlerFailure, type HandlerContext } from '../../src/runner/types.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/handlers/', import.meta.url));
const fixture = (name: string): string => path.join(FIXTURES, name);

function moduleConfig(name: string, over: Partial<HandlerConfig> = {}): HandlerConfig {
  return { module: fixture(name), timeoutSeconds: 20, killAfterSeconds: 5, maxLogBytes: 65536, env: {}, ...over };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-module-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const item = { id: 'dir/a.scc', path: '/src/dir/a.scc', attempt: 3 };
function context(signal = new AbortController().signal): HandlerContext {
  return { signal, log: pino({ level: 'silent' }), attempt: 3, outputPath: path.join(dir, 'out.tmp') };
}

async function failureOf(p: Promise<unknown>): Promise<HandlerFailure> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(HandlerFailure);
    return err as HandlerFailure;
  }
  throw new Error('expected the attempt to fail');
}

describe('module handler', () => {
  it('runs the default export with the item and context', async () => {
    const handler = await createModuleHandler(moduleConfig('module-ok.mjs'), { sourceDir: '/src' });
    const ctx = context();
    await handler.run(item, ctx);
    expect(readFileSync(ctx.outputPath!, 'utf8')).toBe('dir/a.scc 3');
  });

  it('runs the default of a CommonJS module compiled from an ES module (tsc, Babel: exports.__esModule)', async () => {
    const handler = await createModuleHandler(moduleConfig('module-tsc-cjs.cjs'), { sourceDir: '/src' });
    const ctx = context();
    await handler.run(item, ctx);
    expect(readFileSync(ctx.outputPath!, 'utf8')).toBe('dir/a.scc 3');
  });

  it('turns a throw into a failure carrying its message', async () => {
    const handler = await createModuleHandler(moduleConfig('module-throws.mjs'), { sourceDir: '/src' });
    const f = await failureOf(handler.run(item, context()));
    expect(f).toMatchObject({ message: 'bad caption at line 3', interrupted: false });
  });

  it('a secret where a long thrown message is cut (2 KB): no piece of it is kept', async () => {
    // The cut (2016 bytes) fell inside the password: 'TopSecre' was kept, and redacting the
    // kept text found no whole password in it.
    const file = path.join(dir, 'long-throw.mjs');
    writeFileSync(file, `export default () => { throw new Error('x'.repeat(2008) + 'TopSecret99' + 'y'.repeat(100)); };`);
    const handler = await createModuleHandler(moduleConfig('module-ok.mjs', { module: file }), { sourceDir: '/src', redact: redactor(['TopSecret99']) });
    const f = await failureOf(handler.run(item, context()));
    expect(f.message).toMatch(/^x{2008}\*\*\*/);
    expect(f.message).not.toMatch(/Top|Sec|cre/);

    // A thrown object is shown as JSON, cut at 500 characters: the same.
    const objFile = path.join(dir, 'object-throw.mjs');
    writeFileSync(objFile, `export default () => { throw { url: 'x'.repeat(480) + 'TopSecret99' }; };`);
    const other = await createModuleHandler(moduleConfig('module-ok.mjs', { module: objFile }), { sourceDir: '/src', redact: redactor(['TopSecret99']) });
    expect((await failureOf(other.run(item, context()))).message).toMatch(/x\*\*\*"}$/);
  });

  it('what it logs through ctx.log (message, fields, a child logger): the secrets are ***', async () => {
    // ctx.log is cronsafe's own logger: a module that logged the URL it was given (or the
    // ledger's, from the environment) put the password in the run's log lines, though its
    // throws and a command handler's output were redacted.
    const file = path.join(dir, 'log-secret.mjs');
    writeFileSync(
      file,
      `export default (item, ctx) => {
        ctx.log.info('connecting to postgres://app:TopSecret99@db/jobs');
        ctx.log.warn({ url: 'postgres://app:TopSecret99@db/jobs', pw: 'Top"Sec' }, 'retrying');
        ctx.log.child({ step: 2 }).error(new Error('auth TopSecret99 refused'));
      };`,
    );
    const handler = await createModuleHandler(moduleConfig('module-ok.mjs', { module: file }), { sourceDir: '/src', redact: redactor(['TopSecret99', 'Top"Sec']) });
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    await handler.run(item, { ...context(), log });
    expect(lines).toHaveLength(3);
    const text = lines.join('');
    expect(text).toContain('connecting to postgres://app:***@db/jobs');
    expect(text).toContain('"step":2');
    expect(text).not.toMatch(/TopSecret99|Top\\"Sec/);
  });

  it('times out a function that ignores its signal, after the grace, without waiting for it', async () => {
    const handler = await createModuleHandler(moduleConfig('module-hangs.mjs', { timeoutSeconds: 0.2, killAfterSeconds: 0.2 }), {
      sourceDir: '/src',
    });
    const t0 = Date.now();
    const f = await failureOf(handler.run(item, context()));
    expect(f).toMatchObject({ message: 'timed out after 0.2s', interrupted: false });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    expect(Date.now() - t0).toBeLessThan(3000);
  });

  it('aborts the per-attempt signal on timeout, so a cooperative function stops at once', async () => {
    const handler = await createModuleHandler(moduleConfig('module-cooperative.mjs', { timeoutSeconds: 0.2, killAfterSeconds: 30 }), {
      sourceDir: '/src',
    });
    const t0 = Date.now();
    const f = await failureOf(handler.run(item, context()));
    expect(f).toMatchObject({ message: 'timed out after 0.2s', interrupted: false });
    expect(Date.now() - t0).toBeLessThan(5000); // did not sit out the 30 s grace
  });

  it('on abort: interrupted=true with the reason', async () => {
    const handler = await createModuleHandler(moduleConfig('module-cooperative.mjs'), { sourceDir: '/src' });
    const ac = new AbortController();
    const run = handler.run(item, context(ac.signal));
    ac.abort(new Error('drain deadline'));
    const f = await failureOf(run);
    expect(f).toMatchObject({ message: 'interrupted: drain deadline', interrupted: true });
  });

  it('on abort: gives up on a function that ignores its signal after killAfterSeconds', async () => {
    const handler = await createModuleHandler(moduleConfig('module-hangs.mjs', { killAfterSeconds: 0.2 }), { sourceDir: '/src' });
    const ac = new AbortController();
    const run = handler.run(item, context(ac.signal));
    ac.abort(new Error('second signal'));
    const f = await failureOf(run);
    expect(f).toMatchObject({ message: 'interrupted: second signal', interrupted: true });
  });

  it('does not call the function when already aborted', async () => {
    const handler = await createModuleHandler(moduleConfig('module-ok.mjs'), { sourceDir: '/src' });
    const ac = new AbortController();
    ac.abort(new Error('drain deadline'));
    const ctx = context(ac.signal);
    const f = await failureOf(handler.run(item, ctx));
    expect(f.interrupted).toBe(true);
    expect(existsSync(ctx.outputPath!)).toBe(false);
  });

  it.each([
    ['undefined', 'threw undefined'],
    ['null', 'threw null'],
    ['string', 'caption track missing'],
    ['empty', 'an empty string'],
    ['symbol', 'threw Symbol(bad-frame)'],
    ['number', 'threw 42 (a number)'],
    ['object', 'threw {"code":"E_CAPTION","line":7}'],
    ['cyclic', 'threw an object (Object)'],
    ['error-code', 'Error: ECONNRESET'],
    ['error-message-code', 'socket hang up (ECONNRESET)'],
    ['aggregate', 'AggregateError: connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432'],
    ['cause', 'Error: caused by upstream timed out'],
    ['bare', 'Error'],
    ['error-number-message', '404 (E_HTTP)'],
    ['error-symbol-message', 'Symbol(no-frame)'],
    ['error-number-name', '7: E_SEVEN'],
  ])('keeps a useful message when the function throws %s', async (id, message) => {
    const handler = await createModuleHandler(moduleConfig('module-throws-value.mjs'), { sourceDir: '/src' });
    try {
      expect((await failureOf(handler.run({ ...item, id }, context()))).message).toBe(message);
    } finally {
      await handler.close?.();
    }
  });

  it.each(['huge', 'huge-string'])('keeps the head of a %s message, at most 2 KiB of it, so that a ledger row and a log line stay small', async (id) => {
    const handler = await createModuleHandler(moduleConfig('module-throws-value.mjs'), { sourceDir: '/src' });
    try {
      const { message } = await failureOf(handler.run({ ...item, id }, context()));
      expect(Buffer.byteLength(message)).toBeLessThanOrEqual(2048);
      expect(message).toMatch(id === 'huge' ? /^bad input: éé/ : /^xxxx/);
      expect(message).toMatch(/… \(\d+ more bytes\)$/);
      expect(message).not.toContain('\ufffd'); // cut between characters, never inside one
    } finally {
      await handler.close?.();
    }
  });

  it('turns process.exit() inside an attempt into that item\'s failure, and restores process.exit on close', async () => {
    // eslint-disable-next-line @typescript-eslint/unbound-method -- compared by identity, never called
    const before = process.exit;
    const handler = await createModuleHandler(moduleConfig('module-exit.mjs'), { sourceDir: '/src' });
    try {
      const f = await failureOf(handler.run({ ...item, id: 'exit-me' }, context()));
      expect(f.message).toMatch(/^handler code called process\.exit\(0\): a module handler fails an item by throwing/);
      expect(f.interrupted).toBe(false);
      await handler.run({ ...item, id: 'fine' }, context()); // the process is still here, and so is the handler
      expect(handler.fatal?.aborted).toBe(false);
    } finally {
      await handler.close?.();
    }
    // eslint-disable-next-line @typescript-eslint/unbound-method -- compared by identity, never called
    expect(process.exit).toBe(before);
  });

  it('stops the run (fatal) when handler code swallows the process.exit throw', async () => {
    const handler = await createModuleHandler(moduleConfig('module-exit.mjs'), { sourceDir: '/src' });
    try {
      await handler.run({ ...item, id: 'swallow-it' }, context());
      expect(handler.fatal?.aborted).toBe(true);
      expect(String(handler.fatal?.reason)).toMatch(/process\.exit\(3\) and no attempt failed with it/);
    } finally {
      await handler.close?.();
    }
  });

  it.each([
    ['module-not-function.mjs', /default export must be a function.*found a number \(42\)/],
    ['module-no-default.mjs', /default export must be a function.*found no default export/],
    ['module-missing.mjs', /cannot import/],
    ['module-cjs-no-function.cjs', /default export must be a function.*found an object \(Object\)/],
  ])('rejects %s with a ConfigError naming handler.module', async (name, pattern) => {
    const err = await createModuleHandler(moduleConfig(name), { sourceDir: '/src' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).key).toBe('handler.module');
    expect((err as Error).message).toContain(`${fixture(name)}: `);
    expect((err as Error).message).toMatch(pattern);
  });
});

describe('createHandler', () => {
  const base = { timeoutSeconds: 5, killAfterSeconds: 1, maxLogBytes: 1024, env: {} };

  it('builds a module handler from handler.module', async () => {
    const handler = await createHandler({ ...base, module: fixture('module-throws.mjs') }, { sourceDir: '/src' });
    expect((await failureOf(handler.run(item, context()))).message).toBe('bad caption at line 3');
  });

  it('builds an exec handler from handler.command', async () => {
    const handler = await createHandler({ ...base, command: [process.execPath, fixture('exit-code.mjs'), '4', 'x'] }, { sourceDir: dir });
    expect((await failureOf(handler.run(item, context()))).message).toBe('exit code 4: x');
  });

  it('refuses both or neither', async () => {
    await expect(createHandler({ ...base, command: ['true'], module: fixture('module-ok.mjs') }, { sourceDir: dir })).rejects.toThrow(
      /exactly one of handler.command and handler.module/,
    );
    await expect(createHandler(base, { sourceDir: dir })).rejects.toThrow(/one of handler.command or handler.module is required/);
    await expect(createHandler({ ...base, command: [] }, { sourceDir: dir })).rejects.toThrow(/non-empty argv/);
  });
});
