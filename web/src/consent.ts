// Approximation consent in the Compute panel (#consent). Nothing approximate happens without it: when
// the server's planner could serve an op only by an approximation (the preview's needs_consent, e.g.
// exact quantiles whose workspace exceeds the memory budget), this section shows that op's fallback
// ladder — each step with its backend, precision class and what it does — and asks for consent, step by
// step. Consent is the server session's (PUT /api/compute allow_approx; never saved, unlike prefer /
// never) and can be withdrawn. Checkpoints whose indexing was refused for want of consent can then be
// indexed again (POST /api/jobs).
//
// Contract: section#consent with data-consented (comma-separated steps); one `.ladder[data-op]` per op
// that needs consent, holding `li[data-step]` rungs with `button.allow` (absent once consented);
// `button.withdraw[data-step]` per consented step; `button.reindex[data-checkpoint]` per checkpoint whose
// latest indexing job failed needing consent.
import { api, type ComputeDoc, type Job } from "./api";
import { el, showError } from "./dom";
import { firstLine, reindexButton } from "./jobs";

export function consentSection(doc: ComputeDoc, redraw: (next: ComputeDoc, message: string) => void): HTMLElement {
  const consented = doc.consent?.allow_approx ?? [];
  const section = el("section", { id: "consent", "data-consented": consented.join(",") });
  const put = async (steps: string[], message: string): Promise<void> => {
    try {
      redraw(await api.putCompute({ allow_approx: steps }), message);
    } catch (e) {
      showError(e, "cannot change the consent");
    }
  };
  section.append(
    el(
      "p",
      { class: "hint" },
      "Exact results are the default. An approximation runs only with your consent, given here for this server session " +
        "(it is not saved; on the command line it is --allow-approx per command).",
    ),
  );
  if (consented.length) {
    const ul = el("ul", { class: "consented" });
    for (const step of consented) {
      const b = el("button", { type: "button", class: "withdraw", "data-step": step }, "Withdraw");
      b.addEventListener("click", () => void put(consented.filter((s) => s !== step), `Consent to ${step} withdrawn.`));
      ul.append(el("li", {}, el("code", {}, step), " allowed for this session ", b));
    }
    section.append(ul);
  } else {
    section.append(el("p", { class: "status" }, "No approximation is allowed."));
  }
  const needing = doc.placement_preview.filter((p) => p.needs_consent && p.ladder?.length);
  for (const pv of needing) {
    const box = el("div", { class: "ladder notice", "data-op": pv.op });
    box.append(el("p", {}, el("b", {}, pv.op), " cannot be computed exactly here: ", el("span", { class: "hint" }, firstLine(pv.error))));
    const ol = el("ol", {});
    for (const rung of pv.ladder ?? []) {
      const li = el("li", { "data-step": rung.step }, el("code", {}, rung.step), ` [${rung.backend}, ${rung.precision}]: ${rung.description} `);
      if (!consented.includes(rung.step)) {
        const b = el("button", { type: "button", class: "allow", "data-step": rung.step }, "Allow for this session");
        b.addEventListener("click", () => void put([...consented, rung.step], `Consented to ${rung.step} for this session.`));
        li.append(b);
      }
      ol.append(li);
    }
    box.append(el("p", {}, "Fallback ladder (the first is the closest to exact):"), ol);
    section.append(box);
  }
  if (!needing.length) section.append(el("p", { class: "hint" }, "No op needs an approximation under the current constraints and memory budget."));
  void reindexOffers(section);
  return section;
}

/** Offers to index again the checkpoints whose latest job failed for want of consent. */
async function reindexOffers(section: HTMLElement): Promise<void> {
  let jobs: Job[];
  try {
    jobs = (await api.jobs()).jobs;
  } catch (e) {
    showError(e, "cannot list the jobs");
    return;
  }
  const latest = new Map<string, Job>();
  for (const j of jobs) if (j.kind === "index") latest.set(j.checkpoint, j);
  for (const j of latest.values()) {
    if (j.state !== "failed" || !j.report?.needs_consent) continue;
    const status = el("span", { class: "hint" });
    const b = reindexButton(j.checkpoint, `Index checkpoint ${j.checkpoint} again`, (job) => {
      status.textContent = ` started job ${job.id}; the tensor list shows its progress.`;
      status.dataset.job = job.id;
    });
    section.append(el("p", {}, `Indexing checkpoint ${j.checkpoint} (job ${j.id}) was refused for want of consent. `, b, status));
  }
}
