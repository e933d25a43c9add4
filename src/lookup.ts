import { spawn } from 'node:child_process';
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';

/**
 * A host name (the Pushgateway's, metrics/push.ts; the ledger's, ledger/postgres/socket.ts), resolved in a child process (`getent ahosts`, the same
 * getaddrinfo with /etc/hosts, search domains and ndots) that is killed when the push (the connect) is cut
 * off. Node's own dns.lookup runs getaddrinfo on a libuv pool thread that nothing can stop,
 * and the process's exit waits for it: with the cluster's DNS not answering (each name of
 * the search list tried for timeout x attempts: tens of seconds in a pod), a run that had logged
 * `run finished` stayed up until the lookup gave up, a drain past the kubelet's SIGKILL (137,
 * not 75). Without getent in the image, dns.lookup it is.
 */
export function killableLookup(signal: AbortSignal): LookupFunction {
  return (hostname: string, options: LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    const family = typeof options.family === 'number' ? options.family : options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : 0;
    let done = false;
    const answer = (err: NodeJS.ErrnoException | null, found: LookupAddress[] = []) => {
      if (done) return;
      done = true;
      signal.removeEventListener('abort', onAbort);
      if (err) return callback(err, options.all ? [] : '', 0);
      const wanted = found.filter((a) => family === 0 || a.family === family);
      if (wanted.length === 0) return callback(notFound(hostname), options.all ? [] : '', 0);
      if (options.all) return callback(null, wanted);
      callback(null, wanted[0]!.address, wanted[0]!.family);
    };
    const literal = isIP(hostname);
    if (literal !== 0) return answer(null, [{ address: hostname, family: literal }]);
    if (signal.aborted) return answer(Object.assign(new Error(`looking up ${hostname}: ${String(signal.reason)}`), { code: 'ETIMEOUT' }));
    // Not the run's environment (CRONSAFE_STATE_POSTGRES, a handler.env secret): what the resolver reads.
    const env = Object.fromEntries(RESOLVER_ENV.flatMap((k) => (process.env[k] === undefined ? [] : [[k, process.env[k]]])));
    // `--`: a name such as `-i` or `--service=files` (valid URL hosts) is the key, not an
    // option; taken as one, it left getent no key and it listed the whole hosts database.
    const child = spawn('getent', ['ahosts', '--', hostname], { stdio: ['ignore', 'pipe', 'ignore'], env });
    function onAbort() {
      child.kill('SIGKILL');
      answer(Object.assign(new Error(`looking up ${hostname}: ${String(signal.reason)}`), { code: 'ETIMEOUT' }));
    }
    signal.addEventListener('abort', onAbort, { once: true });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      if (out.length < 65536) out += chunk;
    });
    const unbounded = () => {
      signal.removeEventListener('abort', onAbort);
      done = true;
      dnsLookup(hostname, options, callback as never);
    };
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT' || done) return answer(err);
      // No getent (an image without glibc's tools): Node's lookup, unbounded as before.
      unbounded();
    });
    child.on('close', (code) => {
      if (done) return;
      // 1: a getent that does not know `ahosts` (`Unknown database`: one not glibc's, as
      // musl or BSD systems have); every push failed as not found. Node's lookup, as without one.
      if (code === 1) return unbounded();
      // getent exits 2 for every getaddrinfo failure: a name that does not exist and a DNS
      // that failed (refused, SERVFAIL: Node's EAI_AGAIN) look alike, so the message says both.
      if (code !== 0) return answer(notFound(hostname, ' (getent ahosts found no address: the name is not known, or the DNS failed)'));
      const seen = new Set<string>();
      const found: LookupAddress[] = [];
      for (const line of out.split('\n')) {
        const address = line.split(/\s+/)[0] ?? '';
        const kind = isIP(address);
        if (kind === 0 || seen.has(address)) continue;
        seen.add(address);
        found.push({ address, family: kind });
      }
      answer(null, found);
    });
  };
}

/** The environment glibc's resolver reads, passed on to getent; nothing else. */
const RESOLVER_ENV = ['PATH', 'LOCALDOMAIN', 'RES_OPTIONS', 'HOSTALIASES'];

function notFound(hostname: string, why = ''): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}${why}`), { code: 'ENOTFOUND', hostname });
}
