import { isIP, Socket, type LookupFunction } from 'node:net';
import { killableLookup } from '../../lookup.js';

/**
 * The socket the driver connects on (pg's `stream` option), whose host name is looked up in a
 * child process that dies with the socket (killableLookup, as for the Pushgateway). The
 * driver's own socket looked it up with Node's dns.lookup, on a libuv pool thread that nothing
 * stops and that the process's exit waits for: with the cluster's DNS not answering, a run
 * whose ledger was given by host name (`postgres://app@db.example/jobs`) could not end, at
 * start-up or after a reconnect mid-run, until every lookup had given up (tens of seconds in a
 * pod); a drain went past the kubelet's SIGKILL (137, not 75). The connect timeout (or the
 * pool's end) destroys the socket, which kills its lookup. The driver still connects with the
 * host name itself, so TLS checks the certificate against it and sends it as SNI, as before.
 * An IP address or a Unix socket's path is connected to as the driver asks.
 */
export function killableSocket(): Socket {
  const socket = new Socket();
  const cut = new AbortController();
  socket.once('close', () => cut.abort(new Error('the connection was closed')));
  const lookup = killableLookup(cut.signal);
  let lookingUp: string | undefined;
  const tracked: LookupFunction = (hostname, options, callback) => {
    lookingUp = hostname;
    lookup(hostname, options, (...answer) => {
      lookingUp = undefined;
      callback(...answer);
    });
  };
  const connect = socket.connect.bind(socket) as (...args: unknown[]) => Socket;
  socket.connect = (...args: unknown[]): Socket => {
    // pg: connect(port, host) over TCP, connect(path) over a Unix socket.
    const [port, host] = args;
    if (args.length !== 2 || typeof host !== 'string' || host.startsWith('/') || isIP(host) !== 0) return connect(...args);
    return connect({ port, host, lookup: tracked });
  };
  // pg's connect timeout destroys the socket with `timeout expired`: say that it was the lookup.
  const destroy = socket.destroy.bind(socket);
  socket.destroy = (err?: Error): Socket => {
    if (err !== undefined && lookingUp !== undefined) err.message += ` (looking up ${lookingUp}: the DNS did not answer)`;
    return destroy(err);
  };
  return socket;
}
