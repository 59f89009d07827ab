// Server-Sent Events parsing over a fetch body.

import { EventTooLargeError } from "./errors.js";
import type { TaskEvent } from "./types.js";

/** The bytes after the last line break of chunk, or -1 when it has none. */
function tailAfterBreak(chunk: Uint8Array): number {
  for (let i = chunk.length - 1; i >= 0; i--) if (chunk[i] === 10 || chunk[i] === 13) return chunk.length - 1 - i;
  return -1;
}

/** Parse SSE from a byte stream: yields each event's JSON data with `event`
 * (the SSE event name) and `seq` (from `id:`) filled in. `onChunk` is
 * called on every chunk read (keep-alives included). A partial event at the
 * end of the stream is dropped. A line longer than `maxEventBytes` bytes, or
 * an event whose data lines together are longer (in characters), throws
 * EventTooLargeError as soon as it is seen (default: no bound). */
export async function* parseSSE(body: ReadableStream<Uint8Array>, onChunk?: () => void, maxEventBytes = Infinity): AsyncGenerator<TaskEvent, void, undefined> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let pending = 0; // bytes read since the last line break
  let size = 0; // characters of the event's data so far
  let name: string | undefined;
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onChunk?.();
      const tail = tailAfterBreak(value);
      pending = tail < 0 ? pending + value.length : tail;
      if (pending > maxEventBytes) throw new EventTooLargeError("an event-stream line", maxEventBytes);
      // Without a line break in the chunk (nor a \r before it) no line ends:
      // a long line is not scanned again on each of its chunks.
      const scan = tail >= 0 || buf.endsWith("\r");
      buf += dec.decode(value, { stream: true });
      if (!scan) continue;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        if (!m) break;
        // A lone \r at the end may be the first half of \r\n.
        if (m[0] === "\r" && m.index === buf.length - 1) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === "") {
          if (data.length) yield sseEvent(name, data.join("\n"), id);
          name = id = undefined;
          data = [];
          size = 0;
          continue;
        }
        size += line.length;
        if (size > maxEventBytes) throw new EventTooLargeError("an event", maxEventBytes);
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? "" : line.slice(i + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") name = value;
        else if (field === "data") data.push(value);
        else if (field === "id") id = value;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function sseEvent(name: string | undefined, data: string, id: string | undefined): TaskEvent {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    v = { data };
  }
  const ev = (v && typeof v === "object" && !Array.isArray(v) ? v : { data: v }) as TaskEvent;
  if (name && !ev.event) ev.event = name;
  if (id !== undefined && ev.seq === undefined && /^\d+$/.test(id)) ev.seq = Number(id);
  return ev;
}
