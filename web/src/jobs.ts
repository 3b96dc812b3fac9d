// Indexing progress on the page: `tensormorph serve` answers while it indexes each checkpoint as a job
// (docs/api.md "Jobs"). followJob() follows one job's Server-Sent Events stream (GET /api/jobs/{id}/events,
// EventSource) until its final event; indexingPanel() shows a progress bar per checkpoint still indexing
// and calls back once every one has ended, so the page can reload what was not there yet.
//
// Contract of the panel (#indexing): one `.job[data-job][data-checkpoint]` per job followed, with
// data-state (running, done, failed, cancelled), data-tensors-done / data-tensors-total and
// data-events (events received); a <progress> over bytes (max = bytes_total).
import { api, apiUrl, type CheckpointInfo, type Job } from "./api";
import { el, showError } from "./dom";
import { fmtBytes, fmtInt } from "./format";

/** Follows a job until its final event; resolves to that last state. The stream reconnects by itself
 * (EventSource) if the connection drops while the job runs. */
export function followJob(id: string, onEvent: (job: Job) => void): Promise<Job> {
  return new Promise((resolve) => {
    const source = new EventSource(apiUrl(`/api/jobs/${encodeURIComponent(id)}/events`));
    const handle = (final: boolean) => (ev: MessageEvent<string>) => {
      const job = JSON.parse(ev.data) as Job;
      onEvent(job);
      if (final) {
        source.close();
        resolve(job);
      }
    };
    source.addEventListener("progress", handle(false));
    for (const name of ["done", "failed", "cancelled"]) source.addEventListener(name, handle(true));
  });
}

function progressText(j: Job): string {
  if (j.state === "failed") return `indexing failed: ${j.error ?? "unknown error"}`;
  if (j.state === "cancelled") return "indexing was cancelled (the server is stopping)";
  if (j.state === "done") return `indexed: ${fmtInt(j.tensors_total)} tensor(s), ${fmtBytes(j.bytes_total)} in ${j.seconds.toFixed(1)} s`;
  if (!j.bytes_total) return "indexing: preparing…";
  const pct = (100 * j.bytes_done) / j.bytes_total;
  const rate = j.bytes_per_s > 0 ? ` · ${fmtBytes(j.bytes_per_s)}/s` : "";
  const eta = j.bytes_per_s > 0 ? ` · about ${Math.ceil((j.bytes_total - j.bytes_done) / j.bytes_per_s)} s left` : "";
  return `indexing: ${pct.toFixed(0)} % · ${fmtInt(j.tensors_done)} of ${fmtInt(j.tensors_total)} tensors${rate}${eta}`;
}

/** The panel for the checkpoints still indexing (null when none is); `onAllEnded` runs once they all have. */
export function indexingPanel(checkpoints: CheckpointInfo[], onAllEnded: () => void): HTMLElement | null {
  const indexing = checkpoints.filter((c) => c.index?.state === "indexing" && c.index.job !== undefined);
  if (!indexing.length) return null;
  const panel = el("div", { class: "indexing", id: "indexing" });
  const follows = indexing.map((c) => {
    const id = c.index?.job as string;
    const bar = el("progress", { max: "1", value: "0" }) as HTMLProgressElement;
    const text = el("span", { class: "job-text" }, "indexing…");
    const line = el("div", { class: "job", "data-job": id, "data-checkpoint": c.id, "data-state": "running", "data-events": "0" },
      el("strong", {}, `${c.name} (${c.id}) `), bar, " ", text);
    panel.append(line);
    let events = 0;
    return followJob(id, (j) => {
      if (!line.isConnected) return;
      line.dataset.events = String(++events);
      line.dataset.state = j.state;
      line.dataset.tensorsDone = String(j.tensors_done);
      line.dataset.tensorsTotal = String(j.tensors_total);
      bar.max = Math.max(1, j.bytes_total);
      bar.value = j.state === "done" ? bar.max : j.bytes_done;
      text.textContent = progressText(j);
    });
  });
  void Promise.all(follows).then(() => {
    if (panel.isConnected) onAllEnded();
  });
  return panel;
}

/** The first line of a (multi-line) server message. */
export function firstLine(s: string | undefined): string {
  return (s ?? "").split("\n")[0];
}

/** "Index again" for a checkpoint (POST /api/jobs): `button.reindex[data-checkpoint]`, disabled while the
 * request runs (and after it succeeded); `onStarted` gets the new job; a refusal is shown in the banner. */
export function reindexButton(checkpoint: string, label: string, onStarted: (job: Job) => void): HTMLButtonElement {
  const b = el("button", { type: "button", class: "reindex", "data-checkpoint": checkpoint }, label);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try {
      onStarted(await api.startIndexing(checkpoint));
    } catch (e) {
      b.disabled = false;
      showError(e, "cannot start indexing");
    }
  });
  return b;
}

/** The checkpoints whose indexing failed (null when none): the error, a link to the Compute panel when
 * the job needed consent to an approximation, and "Index again" (POST /api/jobs), which calls `onStarted`.
 * Contract: #indexing-failed with one `.failed-job[data-checkpoint]` each, holding `button.reindex`. */
export function failedIndexingPanel(checkpoints: CheckpointInfo[], onStarted: () => void): HTMLElement | null {
  const failed = checkpoints.filter((c) => c.index?.state === "failed");
  if (!failed.length) return null;
  const panel = el("div", { class: "indexing failed", id: "indexing-failed" });
  for (const c of failed) {
    const error = c.index?.error ?? "unknown error";
    const needsConsent = c.index?.needs_consent === true;
    const b = reindexButton(c.id, "Index again", () => onStarted());
    panel.append(
      el(
        "div",
        { class: "failed-job", "data-checkpoint": c.id, "data-needs-consent": String(needsConsent) },
        el("strong", {}, `${c.name} (${c.id}): `),
        el("span", { class: "job-text" }, `indexing failed: ${firstLine(error)} `),
        ...(needsConsent ? [el("a", { href: "#/compute" }, "consent to an approximation in the Compute panel"), " then "] : []),
        b,
      ),
    );
  }
  return panel;
}
