// Server-Sent Events parsing over a fetch body.

import type { TaskEvent } from "./types.js";

/** Parse SSE from a byte stream: yields each event's JSON data with `event`
 * (the SSE event name) and `seq` (from `id:`) filled in. `onChunk` is
 * called on every chunk read (keep-alives included). A partial event at the
 * end of the stream is dropped. */
export async function* parseSSE(body: ReadableStream<Uint8Array>, onChunk?: () => void): AsyncGenerator<TaskEvent, void, undefined> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let name: string | undefined;
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onChunk?.();
      buf += dec.decode(value, { stream: true });
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
          continue;
        }
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
