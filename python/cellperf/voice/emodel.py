"""ITU-T G.107 E-model: transmission rating R, MOS and user-satisfaction bands.

Two models, both vectorised over numpy arrays (one value per window, NaN where a window has
no data; NaN goes in, NaN comes out):

- `r_simple`: the reduction of Cole & Rosenbluth (2001, "Voice over IP performance monitoring",
  eqs. 5 and 10) that the thesis uses (seed 000 §3.2, eq. 3.3): all parameters but delay and loss
  at their G.107 defaults, R = 94.2 − Id − Ie,eff. Loss enters through a curve fitted per codec,
  which assumes random (not bursty) loss.
- `r_g107`: the full computation of ITU-T G.107 (06/2015) §7, every parameter exposed through
  `G107Params` with the Recommendation's defaults (Table 3), loss through Ppl, BurstR and the
  codec's Bpl (G.113 Appendix I).

`docs/voice.md` says which to use when. docs/methods.md §5 is the specification.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Codec:
    """A codec's E-model constants.

    `ie` and `bpl` are the equipment impairment and packet-loss robustness factors of
    ITU-T G.113 Appendix I (used by `r_g107`). `simple_fit` = (γ1, γ2, γ3) of the
    Cole–Rosenbluth loss curve Ie,eff = γ1 + γ2·ln(1 + γ3·e), or None when the paper gives no
    fit for this codec (then only the full G.107 model can rate it).
    """

    name: str
    description: str
    ie: float
    bpl: float
    simple_fit: tuple[float, float, float] | None


CODECS: dict[str, Codec] = {
    c.name: c
    for c in (
        Codec("g711", "G.711 64 kb/s, no packet-loss concealment", 0.0, 4.3, (0.0, 30.0, 15.0)),
        Codec("g711-plc", "G.711 64 kb/s with packet-loss concealment (Appendix I)", 0.0, 25.1, None),
        Codec("g729a", "G.729A 8 kb/s (CS-ACELP)", 11.0, 19.0, (11.0, 40.0, 10.0)),
        Codec("g723.1", "G.723.1 6.3 kb/s (MP-MLQ)", 15.0, 16.1, None),
        Codec("gsm-fr", "GSM full rate 13 kb/s (RPE-LTP)", 20.0, 10.0, None),
    )
}

MODELS = ("simple", "g107")


def codec(name: str) -> Codec:
    """The codec called `name` (one of `CODECS`); ValueError naming the choices otherwise."""
    try:
        return CODECS[name]
    except KeyError:
        raise ValueError(f"unknown codec {name!r}; choose one of {', '.join(CODECS)}") from None


@dataclass(frozen=True)
class G107Params:
    """Every G.107 (06/2015) input that is not delay or loss, at the Table 3 defaults.

    Loudness ratings in dB, noise in dBm0p / dBmp, room noise in dB(A), times in ms.
    LSTR is the listener sidetone rating STMR + Dr (Dr = 3 by default).
    """

    slr: float = 8.0  # send loudness rating
    rlr: float = 2.0  # receive loudness rating
    stmr: float = 15.0  # sidetone masking rating
    lstr: float = 18.0  # listener sidetone rating
    ds: float = 3.0  # D-value of the telephone, send side
    telr: float = 65.0  # talker echo loudness rating
    wepl: float = 110.0  # weighted echo path loss
    qdu: float = 1.0  # quantising distortion units
    nc: float = -70.0  # circuit noise referred to the 0 dBr point
    nfor: float = -64.0  # noise floor at the receive side
    ps: float = 35.0  # room noise at the send side
    pr: float = 35.0  # room noise at the receive side
    a: float = 0.0  # advantage factor (0 wired; up to 10 mobile, 20 satellite)
    mt: float = 100.0  # minimum perceivable absolute delay
    st: float = 1.0  # absolute-delay sensitivity

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _as_float_array(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _check_inputs(delay_ms: np.ndarray, loss: np.ndarray) -> None:
    """Reject delays below zero and loss outside [0, 1]; NaN (no data) passes through."""
    if np.any(delay_ms < 0):
        bad = delay_ms[delay_ms < 0].min()
        raise ValueError(f"delay must be >= 0 ms, got {bad:g}")
    if np.any((loss < 0) | (loss > 1)):
        bad = loss[(loss < 0) | (loss > 1)][0]
        raise ValueError(f"loss must be a fraction in [0, 1], got {bad:g}")


def _check_burst_ratio(burst_ratio: np.ndarray) -> None:
    if np.any(burst_ratio <= 0):
        raise ValueError(f"burst ratio must be > 0, got {burst_ratio[burst_ratio <= 0][0]:g}")


def delay_impairment_simple(delay_ms) -> np.ndarray:
    """Cole–Rosenbluth Id = 0.024·d + 0.11·(d − 177.3)·H(d − 177.3), d one-way in ms."""
    d = _as_float_array(delay_ms)
    return 0.024 * d + 0.11 * np.maximum(d - 177.3, 0.0)


def simple_components(delay_ms, loss, codec_name: str = "g711") -> dict[str, np.ndarray]:
    """Simplified E-model terms: R = 94.2 − Id − Ie,eff (unclamped), Id and Ie,eff.

    `delay_ms` is the one-way (mouth-to-ear network) delay, `loss` the loss fraction in [0, 1].
    Loss is assumed random: the Cole–Rosenbluth curves were fitted to random-loss data, so this
    model has no burst-ratio input (use the g107 model for bursty loss).
    """
    c = codec(codec_name)
    if c.simple_fit is None:
        fitted = ", ".join(n for n, k in CODECS.items() if k.simple_fit is not None)
        raise ValueError(
            f"the simplified model has Cole–Rosenbluth loss fits only for {fitted}; "
            f"rate {codec_name} with the g107 model"
        )
    d = _as_float_array(delay_ms)
    e = _as_float_array(loss)
    _check_inputs(d, e)
    g1, g2, g3 = c.simple_fit
    id_ = delay_impairment_simple(d)
    ie_eff = g1 + g2 * np.log1p(g3 * e)
    return {"r": 94.2 - id_ - ie_eff, "id": id_, "ie_eff": ie_eff}


def r_simple(delay_ms, loss, codec_name: str = "g711") -> np.ndarray:
    """Simplified E-model R (see `simple_components`), clamped to [0, 100]."""
    return np.clip(simple_components(delay_ms, loss, codec_name)["r"], 0.0, 100.0)


def g107_components(
    t_ms,
    ta_ms,
    tr_ms,
    ppl_percent,
    burst_ratio,
    ie: float,
    bpl: float,
    params: G107Params = G107Params(),
) -> dict[str, np.ndarray]:
    """The full G.107 (06/2015) §7 computation, returning every intermediate term.

    `t_ms` mean one-way delay of the echo path (T), `ta_ms` absolute delay (Ta), `tr_ms`
    round-trip delay in a 4-wire loop (Tr), `ppl_percent` random packet-loss probability in
    percent (Ppl), `burst_ratio` BurstR (1 = random loss). Returns R (unclamped) and Ro, Is, Id
    (Idte + Idle + Idd), Ie,eff and their parts.
    """
    p = params
    t = _as_float_array(t_ms)
    ta = _as_float_array(ta_ms)
    tr = _as_float_array(tr_ms)
    ppl = _as_float_array(ppl_percent)
    burst = _as_float_array(burst_ratio)

    # §7.2 basic signal-to-noise ratio Ro.
    olr = p.slr + p.rlr
    nos = p.ps - p.slr - p.ds - 100 + 0.004 * (p.ps - olr - p.ds - 14) ** 2
    pre = p.pr + 10 * np.log10(1 + 10 ** ((10 - p.lstr) / 10))
    nor = p.rlr - 121 + pre + 0.008 * (pre - 35) ** 2
    nfo = p.nfor + p.rlr
    no = 10 * np.log10(10 ** (p.nc / 10) + 10 ** (nos / 10) + 10 ** (nor / 10) + 10 ** (nfo / 10))
    ro = 15 - 1.5 * (p.slr + no)

    # §7.3 simultaneous impairment Is = Iolr + Ist + Iq.
    xolr = olr + 0.2 * (64 + no - p.rlr)
    iolr = 20 * ((1 + (xolr / 8) ** 8) ** (1 / 8) - xolr / 8)
    stmro = -10 * np.log10(10 ** (-p.stmr / 10) + np.exp(-t / 4) * 10 ** (-p.telr / 10))
    ist = (
        12 * (1 + ((stmro - 13) / 6) ** 8) ** (1 / 8)
        - 28 * (1 + ((stmro + 1) / 19.4) ** 35) ** (1 / 35)
        - 13 * (1 + ((stmro - 3) / 33) ** 13) ** (1 / 13)
        + 29
    )
    q = 37 - 15 * np.log10(p.qdu)
    g = 1.07 + 0.258 * q + 0.0602 * q**2
    z = 46 / 30 - g / 40
    y = (ro - 100) / 15 + 46 / 8.4 - g / 9
    iq = 15 * np.log10(1 + 10**y + 10**z)
    is_ = iolr + ist + iq

    # §7.4 delay impairment Id = Idte + Idle + Idd.
    terv = p.telr - 40 * np.log10((1 + t / 10) / (1 + t / 150)) + 6 * np.exp(-0.3 * t**2)
    if p.stmr < 9:  # weak sidetone no longer masks talker echo (§7.4 note)
        terv = terv + ist / 2
    roe = -1.5 * (no - p.rlr)
    re = 80 + 2.5 * (terv - 14)
    idte = ((roe - re) / 2 + np.sqrt((roe - re) ** 2 / 4 + 100) - 1) * (1 - np.exp(-t))
    rle = 10.5 * (p.wepl + 7) * (tr + 1) ** -0.25
    idle = (ro - rle) / 2 + np.sqrt((ro - rle) ** 2 / 4 + 169)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log10(ta / p.mt) / np.log10(2)
        six_st = 6 * p.st
        idd = np.where(
            ta > p.mt,
            25
            * (
                (1 + x**six_st) ** (1 / six_st)
                - 3 * (1 + (x / 3) ** six_st) ** (1 / six_st)
                + 2
            ),
            0.0,
        )
    idd = np.where(np.isnan(ta), np.nan, idd)
    id_ = idte + idle + idd

    # §7.5 effective equipment impairment under packet loss.
    ie_eff = ie + (95 - ie) * ppl / (ppl / burst + bpl)

    r = ro - is_ - id_ - ie_eff + p.a
    return {
        "r": r,
        "ro": np.full(r.shape, ro),
        "is": is_,
        "id": id_,
        "idte": idte,
        "idle": idle,
        "idd": idd,
        "ie_eff": ie_eff,
    }


def r_g107(
    delay_ms,
    loss,
    codec_name: str = "g711",
    burst_ratio=1.0,
    params: G107Params = G107Params(),
) -> np.ndarray:
    """Full G.107 R for a one-way delay d (T = Ta = d, Tr = 2d) and loss fraction, clamped to [0, 100].

    `burst_ratio` is BurstR (1 for random loss, > 1 for bursty loss; see `burst_ratio_by_group`).
    """
    c = codec(codec_name)
    d = _as_float_array(delay_ms)
    e = _as_float_array(loss)
    b = _as_float_array(burst_ratio)
    _check_inputs(d, e)
    _check_burst_ratio(b)
    comp = g107_components(d, d, 2 * d, 100 * e, b, c.ie, c.bpl, params)
    return np.clip(comp["r"], 0.0, 100.0)


def rating(
    delay_ms,
    loss,
    model: str = "simple",
    codec_name: str = "g711",
    burst_ratio=None,
    params: G107Params = G107Params(),
) -> np.ndarray:
    """R from either model by name (`simple` or `g107`).

    `burst_ratio` None means random loss (BurstR = 1). The simplified model refuses any other
    burst ratio and any non-default G.107 parameter rather than silently ignoring them.
    """
    if model == "simple":
        if burst_ratio is not None and np.any(np.asarray(burst_ratio, dtype=np.float64) != 1.0):
            raise ValueError("the simplified model assumes random loss; a burst ratio needs the g107 model")
        if params != G107Params():
            raise ValueError("G.107 parameters only apply to the g107 model")
        return r_simple(delay_ms, loss, codec_name)
    if model == "g107":
        return r_g107(delay_ms, loss, codec_name, 1.0 if burst_ratio is None else burst_ratio, params)
    raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")


def mos_from_r(r) -> np.ndarray:
    """MOS (conversational quality estimate) from R: G.107 Annex B, seed 000 eq. 3.1."""
    r = np.asarray(r, dtype=np.float64)
    mos = 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6
    return np.where(r <= 0, 1.0, np.where(r >= 100, 4.5, mos))


# G.109 user-satisfaction bands, lower R bound of each (Table 1 of G.109).
BANDS: tuple[tuple[float, str], ...] = (
    (90.0, "very satisfied"),
    (80.0, "satisfied"),
    (70.0, "some users dissatisfied"),
    (60.0, "many users dissatisfied"),
    (50.0, "nearly all users dissatisfied"),
    (-np.inf, "not recommended"),
)


def satisfaction_band(r) -> np.ndarray:
    """G.109 band name per R; None where R is NaN (no data)."""
    r = np.asarray(r, dtype=np.float64)
    bounds = np.array([b for b, _ in BANDS[::-1]])  # ascending: -inf, 50, ..., 90
    names = np.array([n for _, n in BANDS[::-1]] + [None], dtype=object)
    idx = np.searchsorted(bounds, r, side="right") - 1
    return np.where(np.isnan(r), names[-1], names[np.clip(idx, 0, len(bounds) - 1)])
