// Raw HTTP/1.1 on a socket, for the egress proxy's rows: what a hostile client writes, byte for byte.
import { connect } from 'node:net';

/** What comes back on a raw connection until it closes (or `ms` pass). */
export function raw(port: number, text: string, ms = 10_000): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const s = connect({ host: '127.0.0.1', port }, () => s.write(text));
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('error', () => resolve(got));
    s.on('close', () => resolve(got));
    setTimeout(() => s.destroy(), ms);
  });
}
