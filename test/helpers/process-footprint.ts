/**
 * What a running process holds, read from /proc (Linux): the native media libraries it has mapped
 * and the UDP sockets it owns. A gateway whose webrtc streams publish over WHIP maps no WebRTC
 * library and opens no UDP socket: the media never reaches it.
 */
import fs from 'node:fs';

/** Native modules of the WebRTC stacks (`@roamhq/wrtc`, `@livekit/rtc-node`) mapped into `pid`. */
export function mediaLibrariesMapped(pid: number): string[] {
  const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8');
  const files = new Set(
    maps
      .split('\n')
      .map((l) => l.split(/\s+/).slice(5).join(' '))
      .filter((f) => f.endsWith('.node') || f.includes('.node ')),
  );
  return [...files].filter((f) => /wrtc|rtc-node|livekit|webrtc/i.test(f)).sort();
}

/** Socket inodes among `pid`'s open files. */
function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) out.add(m[1]!);
    } catch {
      // closed while reading
    }
  }
  return out;
}

/** UDP sockets (IPv4 and IPv6) `pid` holds open now. */
export function udpSockets(pid: number): number {
  const mine = socketInodes(pid);
  let n = 0;
  for (const table of ['udp', 'udp6']) {
    let text = '';
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue; // no IPv6 in this namespace
    }
    for (const line of text.split('\n').slice(1)) {
      const inode = line.trim().split(/\s+/)[9];
      if (inode && mine.has(inode)) n++;
    }
  }
  return n;
}
