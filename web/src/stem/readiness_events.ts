// An acquisition's readiness, pushed by the server (GET /api/acquisitions/{id}/events, docs/api.md): the summary at
// once, then one `readiness` event whenever status, frames_present, frames_expected or problems change (an
// `error` event when the server could not reopen the files; it keeps watching). EventSource reconnects by itself
// after a dropped connection, as followJob does (web/src/jobs.ts); when the server refuses or ends the stream
// for good (503 with too many streams, a restart), the stream is opened again after a pause.
import { apiUrl } from "../api";

/** The readiness of an acquisition's files (`stem inspect --json`'s `readiness`). */
export interface Readiness {
  status: "complete" | "incomplete" | string;
  frames_present: number;
  frames_expected: number | null;
  problems: string[];
  data_files?: unknown[];
}

/** GET /api/acquisitions/{id}'s document: the fields read here, and everything else it holds. */
export interface ReadinessSummary {
  id: string;
  name: string;
  path: string;
  readiness: Readiness;
  [key: string]: unknown;
}

const kRetryFirstMs = 1000;
const kRetryMaxMs = 30000;

/** Calls `onChange` with the summary at once and on every readiness change until the returned function is
 * called (which closes the stream and cancels any pending reconnect). `onError`, when given, gets the server's
 * message when it could not reopen the acquisition. */
export function followReadiness(
  id: string,
  onChange: (summary: ReadinessSummary) => void,
  onError?: (message: string) => void,
): () => void {
  let source: EventSource | null = null;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let closed = false;
  let delay = kRetryFirstMs;

  const open = () => {
    retry = null;
    if (closed) return;
    const s = new EventSource(apiUrl(`/api/acquisitions/${encodeURIComponent(id)}/events`));
    source = s;
    s.addEventListener("readiness", (ev: MessageEvent<string>) => {
      delay = kRetryFirstMs;
      if (!closed) onChange(JSON.parse(ev.data) as ReadinessSummary);
    });
    s.addEventListener("error", (ev: Event) => {
      // A named `error` event carries the server's message; a plain one is the connection's.
      const data = (ev as MessageEvent<string>).data;
      if (typeof data === "string" && data) {
        if (!closed && onError) onError((JSON.parse(data) as { error?: string }).error ?? data);
        return;
      }
      if (s.readyState !== EventSource.CLOSED || closed) return;  // reconnecting by itself
      s.close();
      if (source === s) source = null;
      retry = setTimeout(open, delay);
      delay = Math.min(kRetryMaxMs, delay * 2);
    });
  };
  open();

  return () => {
    closed = true;
    if (retry !== null) clearTimeout(retry);
    retry = null;
    source?.close();
    source = null;
  };
}
