// Embeddings from triplet judgments ("the anchor is closer to `near` than to `far`"), in two
// dimensions, as the paper fits its idea maps: t-STE (van der Maaten and Weinberger, "Stochastic
// triplet embedding", 2012), and SOE (Terada and von Luxburg, "Local ordinal embedding", 2014) as
// the paper's check. Pure and deterministic: the start comes from the seed, the step count is
// fixed, and the arithmetic runs in one order, so the same judgments always give the same map.
import { SOE_MARGIN, TSTE } from '../method.js';
import { randomFrom } from '../rng.js';

/** A judgment by point index: `anchor` is closer to `near` than to `far`. */
export interface IndexTriplet {
  anchor: number;
  near: number;
  far: number;
}

export type Coordinates = [number, number][];

export interface EmbedOptions {
  seed: number;
  method?: 'tste' | 'soe';
  /** Gradient steps (default TSTE.steps). */
  steps?: number;
}

/** The embedding of `n` points that best agrees with the triplets. */
export function embed(n: number, triplets: readonly IndexTriplet[], o: EmbedOptions): Coordinates {
  for (const t of triplets)
    for (const i of [t.anchor, t.near, t.far])
      if (!(Number.isInteger(i) && i >= 0 && i < n)) throw new Error(`triplet index ${i} is not a point of ${n}`);
  const x = start(n, o.seed, o.method === 'soe' ? 1 : TSTE.initialScale);
  if (n < 2 || triplets.length === 0) return toPairs(x);
  const objective = o.method === 'soe' ? soe : tste;
  descend(x, triplets, objective, o.steps ?? TSTE.steps);
  return toPairs(x);
}

/** The loss of the points `x` on the triplets, and (into `grad`) its gradient; both means over triplets. */
type Objective = (x: Float64Array, triplets: readonly IndexTriplet[], grad: Float64Array) => number;

/**
 * Gradient descent with the "bold driver" step of the t-STE authors' code: a step that lowers the
 * loss is kept and the next one is longer; one that does not is undone and the step halved.
 */
function descend(x: Float64Array, triplets: readonly IndexTriplet[], objective: Objective, steps: number): void {
  const grad = new Float64Array(x.length);
  const trial = new Float64Array(x.length);
  const trialGrad = new Float64Array(x.length);
  let loss = objective(x, triplets, grad);
  // The gradient is a mean over triplets, and each point is in about 3T/n of them: a step of n moves
  // a point about as far as one triplet's pull would.
  let eta = x.length / TSTE.dims;
  for (let s = 0; s < steps; s++) {
    for (let k = 0; k < x.length; k++) trial[k] = (x[k] as number) - eta * (grad[k] as number);
    const next = objective(trial, triplets, trialGrad);
    if (next < loss) {
      x.set(trial);
      grad.set(trialGrad);
      loss = next;
      eta *= TSTE.grow;
    } else {
      eta *= TSTE.shrink;
      if (eta < 1e-12) return;
    }
  }
}

/**
 * t-STE: the probability that a triplet holds is the Student-t kernel of the near distance over the
 * sum of both kernels, q(d²) = (1 + d²/α)^-(α+1)/2; the loss is the mean negative log probability.
 */
const tste: Objective = (x, triplets, grad) => {
  const a = TSTE.alpha;
  const power = -(a + 1) / 2;
  const c = (a + 1) / a;
  return meanOverTriplets(x, triplets, grad, (dj2, dl2) => {
    const wj = 1 / (1 + dj2 / a);
    const wl = 1 / (1 + dl2 / a);
    const qj = wj ** -power;
    const ql = wl ** -power;
    const p = qj / (qj + ql);
    // d(-log p)/dx_i = c (1 - p) [wj (x_i - x_j) - wl (x_i - x_l)], and the opposite pulls on j and l.
    const g = c * (1 - p);
    return { loss: -Math.log(Math.max(p, 1e-300)), near: g * wj, far: g * wl };
  });
};

/** SOE: the mean squared hinge max(0, margin + |x_i - x_near| - |x_i - x_far|)². */
const soe: Objective = (x, triplets, grad) =>
  meanOverTriplets(x, triplets, grad, (dj2, dl2) => {
    const dj = Math.sqrt(dj2) || 1e-12;
    const dl = Math.sqrt(dl2) || 1e-12;
    const v = SOE_MARGIN + dj - dl;
    if (v <= 0) return null;
    return { loss: v * v, near: (2 * v) / dj, far: (2 * v) / dl };
  });

/**
 * One triplet's share of an objective, from the squared distances of the anchor to the near and the
 * far point: its loss, and the coefficients of its gradient along (x_i - x_near) and (x_i - x_far);
 * null when it adds nothing.
 */
type TripletTerm = (dj2: number, dl2: number) => { loss: number; near: number; far: number } | null;

/**
 * The mean of `term` over the triplets, its gradient in `grad`: a triplet pulls the anchor by
 * near·(x_i - x_j) - far·(x_i - x_l), and the near and far points the opposite ways.
 */
function meanOverTriplets(
  x: Float64Array,
  triplets: readonly IndexTriplet[],
  grad: Float64Array,
  term: TripletTerm,
): number {
  grad.fill(0);
  let loss = 0;
  for (const t of triplets) {
    const i = 2 * t.anchor;
    const j = 2 * t.near;
    const l = 2 * t.far;
    const dxj = (x[i] as number) - (x[j] as number);
    const dyj = (x[i + 1] as number) - (x[j + 1] as number);
    const dxl = (x[i] as number) - (x[l] as number);
    const dyl = (x[i + 1] as number) - (x[l + 1] as number);
    const share = term(dxj * dxj + dyj * dyj, dxl * dxl + dyl * dyl);
    if (share === null) continue;
    loss += share.loss;
    grad[i] = (grad[i] as number) + share.near * dxj - share.far * dxl;
    grad[i + 1] = (grad[i + 1] as number) + share.near * dyj - share.far * dyl;
    grad[j] = (grad[j] as number) - share.near * dxj;
    grad[j + 1] = (grad[j + 1] as number) - share.near * dyj;
    grad[l] = (grad[l] as number) + share.far * dxl;
    grad[l + 1] = (grad[l + 1] as number) + share.far * dyl;
  }
  const m = triplets.length;
  for (let k = 0; k < grad.length; k++) grad[k] = (grad[k] as number) / m;
  return loss / m;
}

/** Normal draws of the given scale (Box–Muller over the seeded generator). */
function start(n: number, seed: number, scale: number): Float64Array {
  const random = randomFrom(seed);
  const x = new Float64Array(2 * n);
  for (let k = 0; k < x.length; k += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - random()));
    const a = 2 * Math.PI * random();
    x[k] = scale * r * Math.cos(a);
    x[k + 1] = scale * r * Math.sin(a);
  }
  return x;
}

function toPairs(x: Float64Array): Coordinates {
  const out: Coordinates = [];
  for (let k = 0; k < x.length; k += 2) out.push([x[k] as number, x[k + 1] as number]);
  return out;
}

/**
 * The share of triplets the embedding agrees with: the anchor nearer to `near` than to `far`; a tie
 * counts half (a coin would get it right half the time). null without triplets.
 */
export function agreement(points: Coordinates, triplets: readonly IndexTriplet[]): number | null {
  if (triplets.length === 0) return null;
  let right = 0;
  for (const t of triplets) {
    const dn = distance2(points[t.anchor], points[t.near]);
    const df = distance2(points[t.anchor], points[t.far]);
    right += dn < df ? 1 : dn === df ? 0.5 : 0;
  }
  return right / triplets.length;
}

export function distance2(p: readonly [number, number] | undefined, q: readonly [number, number] | undefined): number {
  if (!p || !q) return Number.NaN;
  const dx = p[0] - q[0];
  const dy = p[1] - q[1];
  return dx * dx + dy * dy;
}
