// Following an acquisition's readiness by Server-Sent Events (GET /api/acquisitions/{id}/events, docs/api.md).
import { apiUrl } from "../api";

export interface ReadinessSummary {
  id: string;
  readiness: { status: string; frames_present: number; frames_expected: number | null; problems: string[] };
  [key: string]: unknown;
}

/** Calls onChange with each summary the server sends (the first at once); returns a function that stops following. */
export function followReadiness(id: string, onChange: (summary: ReadinessSummary) => void): () => void {
  const source = new EventSource(apiUrl(`/api/acquisitions/${encodeURIComponent(id)}/events`));
  source.onmessage = (ev) => onChange(JSON.parse(ev.data) as ReadinessSummary);
  return () => source.close();
}
