//! WAV input and output, mono downmix and resampling to the model's 16 kHz input rate.
//!
//! Input: any WAV that `hound` can parse (PCM integer 8/16/24/32-bit, IEEE float 32-bit, plain
//! or `WAVE_FORMAT_EXTENSIBLE`, any channel count, sample rates from [`MIN_SAMPLE_RATE`] to
//! [`MAX_SAMPLE_RATE`]). Channels are averaged to mono (liquid-audio's `ChatState.add_audio` takes
//! mono only, so averaging is the caller's usual downmix) and the result is resampled to
//! [`INPUT_SAMPLE_RATE`] with [`resample`]. Output: 24 kHz mono 32-bit float WAVs, the
//! detokenizer's native format.
//!
//! Every malformed input maps to a typed [`AudioError`]; nothing here panics on bad data.

use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Sample rate the feature extractor and encoder expect (Hz).
pub const INPUT_SAMPLE_RATE: u32 = 16_000;

/// Sample rate of the audio the detokenizer produces (Hz).
pub const OUTPUT_SAMPLE_RATE: u32 = 24_000;

/// Default longest input accepted, in seconds.
///
/// Ten minutes of audio become 7 500 encoder embeddings (12.5 per second), which still fits the
/// 8 192-step conversation limit; anything longer could never be used whole.
pub const DEFAULT_MAX_SECONDS: f64 = 600.0;

/// Lowest sample rate accepted for input or resampling (Hz).
pub const MIN_SAMPLE_RATE: u32 = 1_000;
/// Highest sample rate accepted for input or resampling (Hz). Bounds the resampler's cost: its
/// kernel length grows with the ratio of the two rates.
pub const MAX_SAMPLE_RATE: u32 = 192_000;

fn check_rate(rate: u32) -> Result<(), AudioError> {
    if (MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(AudioError::UnsupportedFormat(format!(
            "sample rate {rate} Hz outside {MIN_SAMPLE_RATE}..={MAX_SAMPLE_RATE} Hz"
        )))
    }
}

/// Refuses `seconds` over `limit` (and everything when the limit is NaN).
fn check_duration(seconds: f64, limit: f64) -> Result<(), AudioError> {
    match seconds.partial_cmp(&limit) {
        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal) => Ok(()),
        _ => Err(AudioError::TooLong { seconds, limit }),
    }
}

/// Why audio could not be read, resampled or written.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// A file could not be opened or created.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file in question.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a well-formed WAV file (bad header, truncated data, not RIFF at all).
    #[error("unreadable WAV: {0}")]
    Unreadable(String),
    /// The WAV is well formed but uses an encoding this engine does not decode
    /// (e.g. 64-bit float, A-law, a zero sample rate).
    #[error("unsupported WAV format: {0}")]
    UnsupportedFormat(String),
    /// The audio holds no samples.
    #[error("audio is empty")]
    Empty,
    /// A sample is NaN or infinite.
    #[error("sample {index} is not finite")]
    NonFinite {
        /// Index of the first offending sample (a frame index for multi-channel input).
        index: usize,
    },
    /// Writing a WAV failed (an I/O error of the destination).
    #[error("cannot write WAV: {0}")]
    Write(String),
    /// The audio is longer than the configured limit.
    #[error("audio lasts {seconds:.3} s, over the {limit:.3} s limit")]
    TooLong {
        /// Duration of the input in seconds.
        seconds: f64,
        /// The limit in force, in seconds.
        limit: f64,
    },
}

/// Options for reading WAV input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadOptions {
    /// Longest accepted input, in seconds (judged from the header before any sample is decoded,
    /// so an oversized upload costs nothing).
    pub max_seconds: f64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            max_seconds: DEFAULT_MAX_SECONDS,
        }
    }
}

/// Mono audio at a given sample rate.
#[derive(Debug, Clone, PartialEq)]
pub struct MonoAudio {
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Samples, nominally in [-1, 1].
    pub samples: Vec<f32>,
}

impl MonoAudio {
    /// Duration in seconds.
    pub fn duration_seconds(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}

fn map_hound(err: hound::Error) -> AudioError {
    match err {
        hound::Error::Unsupported => {
            AudioError::UnsupportedFormat("unsupported WAV encoding".into())
        }
        hound::Error::TooWide => {
            AudioError::UnsupportedFormat("sample width too large to decode".into())
        }
        hound::Error::InvalidSampleFormat => {
            AudioError::UnsupportedFormat("sample format does not match its width".into())
        }
        other => AudioError::Unreadable(other.to_string()),
    }
}

/// Decodes a WAV stream to mono at its own sample rate.
fn decode<R: Read>(reader: R, opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    let mut wav = hound::WavReader::new(reader).map_err(map_hound)?;
    let spec = wav.spec();
    check_rate(spec.sample_rate)?;
    if spec.channels == 0 {
        return Err(AudioError::UnsupportedFormat("channel count is 0".into()));
    }
    let channels = usize::from(spec.channels);
    // Judge the length from the header first so that a huge upload is refused before decoding.
    let frames = wav.duration() as usize;
    let seconds = frames as f64 / f64::from(spec.sample_rate);
    check_duration(seconds, opts.max_seconds)?;
    if frames == 0 {
        return Err(AudioError::Empty);
    }

    // The header's length is only a claim: cap the up-front allocation and let the vector grow.
    let mut mono = Vec::with_capacity(frames.min(1 << 22));
    let inv_channels = 1.0 / channels as f64;
    let mut acc = 0.0f64;
    let mut in_frame = 0usize;
    let mut push = |value: f64, mono: &mut Vec<f32>| {
        acc += value;
        in_frame += 1;
        if in_frame == channels {
            mono.push((acc * inv_channels) as f32);
            acc = 0.0;
            in_frame = 0;
        }
    };
    match spec.sample_format {
        hound::SampleFormat::Float => {
            if spec.bits_per_sample != 32 {
                return Err(AudioError::UnsupportedFormat(format!(
                    "{}-bit float samples",
                    spec.bits_per_sample
                )));
            }
            for sample in wav.samples::<f32>() {
                let sample = sample.map_err(map_hound)?;
                if !sample.is_finite() {
                    return Err(AudioError::NonFinite { index: mono.len() });
                }
                push(f64::from(sample), &mut mono);
            }
        }
        hound::SampleFormat::Int => {
            if !(1..=32).contains(&spec.bits_per_sample) {
                return Err(AudioError::UnsupportedFormat(format!(
                    "{}-bit integer samples",
                    spec.bits_per_sample
                )));
            }
            // Full scale is 2^(bits-1), as soundfile/torchaudio normalise integer PCM.
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f64;
            for sample in wav.samples::<i32>() {
                let sample = sample.map_err(map_hound)?;
                push(f64::from(sample) * scale, &mut mono);
            }
        }
    }
    if mono.is_empty() {
        return Err(AudioError::Empty);
    }
    Ok(MonoAudio {
        sample_rate: spec.sample_rate,
        samples: mono,
    })
}

/// Decodes WAV bytes to mono at the file's own sample rate (channels averaged).
pub fn decode_wav_bytes(bytes: &[u8], opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    decode(Cursor::new(bytes), opts)
}

/// Decodes a WAV file to mono at the file's own sample rate (channels averaged).
pub fn decode_wav_file(path: &Path, opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    let file = File::open(path).map_err(|source| AudioError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(BufReader::new(file), opts)
}

/// Reads WAV bytes as the model's input: mono, 16 kHz, f32.
pub fn load_wav_bytes_16k(bytes: &[u8], opts: &ReadOptions) -> Result<Vec<f32>, AudioError> {
    let audio = decode_wav_bytes(bytes, opts)?;
    resample(&audio.samples, audio.sample_rate, INPUT_SAMPLE_RATE)
}

/// Reads a WAV file as the model's input: mono, 16 kHz, f32.
pub fn load_wav_file_16k(path: &Path, opts: &ReadOptions) -> Result<Vec<f32>, AudioError> {
    let audio = decode_wav_file(path, opts)?;
    resample(&audio.samples, audio.sample_rate, INPUT_SAMPLE_RATE)
}

/// Checks raw samples handed in by a caller (not read from a WAV): non-empty, finite and no
/// longer than `opts.max_seconds` at `sample_rate`.
pub fn validate_samples(
    samples: &[f32],
    sample_rate: u32,
    opts: &ReadOptions,
) -> Result<(), AudioError> {
    check_rate(sample_rate)?;
    if samples.is_empty() {
        return Err(AudioError::Empty);
    }
    let seconds = samples.len() as f64 / f64::from(sample_rate);
    check_duration(seconds, opts.max_seconds)?;
    if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
        return Err(AudioError::NonFinite { index });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Resampling
// ---------------------------------------------------------------------------------------------

/// Zero crossings of the low-pass sinc kept on each side of the kernel centre.
///
/// With [`RESAMPLE_ROLLOFF`] and [`RESAMPLE_KAISER_BETA`] these are resampy's `kaiser_best`
/// parameters (also torchaudio's "kaiser_best" preset): stop-band attenuation beyond 100 dB and a
/// pass band to about 90 % of the lower Nyquist frequency.
pub const RESAMPLE_ZERO_CROSSINGS: usize = 64;
/// Cut-off of the anti-aliasing low-pass as a fraction of the lower of the two Nyquist
/// frequencies.
pub const RESAMPLE_ROLLOFF: f64 = 0.947_593_716_739_959_6;
/// Shape parameter of the Kaiser window applied to the sinc.
pub const RESAMPLE_KAISER_BETA: f64 = 14.769_656_459_379_492;

/// Largest exact polyphase table (phases x taps, f64 entries); rarer rate pairs whose table
/// would be larger use the interpolated kernel instead.
const MAX_PHASE_TABLE: usize = 1 << 20;
/// Phases tabulated for rate pairs too irregular for an exact table; outputs blend the two
/// nearest phases linearly.
const INTERP_PHASES: usize = 512;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Modified Bessel function of the first kind, order 0 (power series; converges quickly for the
/// arguments a Kaiser window needs).
fn bessel_i0(x: f64) -> f64 {
    let half = x * 0.5;
    let mut term = 1.0f64;
    let mut sum = 1.0f64;
    let mut k = 1.0f64;
    loop {
        term *= (half / k) * (half / k);
        sum += term;
        if term < sum * 1e-17 {
            return sum;
        }
        k += 1.0;
    }
}

/// The anti-aliasing kernel, as a function of the distance `x` in input samples.
struct Kernel {
    /// Cut-off in cycles per input sample times two (sinc zero crossings every `1/cutoff`).
    cutoff: f64,
    /// Half-width of the support in input samples.
    half_width: f64,
    i0_beta: f64,
}

impl Kernel {
    fn new(from: u32, to: u32) -> Self {
        // Ratio of the lower of the two rates to the input rate: 1 when upsampling.
        let ratio = f64::from(from.min(to)) / f64::from(from);
        let cutoff = RESAMPLE_ROLLOFF * ratio;
        Self {
            cutoff,
            half_width: RESAMPLE_ZERO_CROSSINGS as f64 / cutoff,
            i0_beta: bessel_i0(RESAMPLE_KAISER_BETA),
        }
    }

    fn eval(&self, x: f64) -> f64 {
        let u = x / self.half_width;
        if u.abs() >= 1.0 {
            return 0.0;
        }
        let arg = std::f64::consts::PI * self.cutoff * x;
        let sinc = if arg == 0.0 { 1.0 } else { arg.sin() / arg };
        let window = bessel_i0(RESAMPLE_KAISER_BETA * (1.0 - u * u).sqrt()) / self.i0_beta;
        self.cutoff * sinc * window
    }
}

/// Resamples mono audio from `from` Hz to `to` Hz.
///
/// The filter is a Kaiser-windowed sinc low-pass (see [`RESAMPLE_ZERO_CROSSINGS`],
/// [`RESAMPLE_ROLLOFF`], [`RESAMPLE_KAISER_BETA`]) at the lower of the two Nyquist frequencies,
/// applied as an exact rational polyphase filter: output sample `n` sits at input time
/// `n * from / to`, and for the common rate pairs (8, 11.025, 22.05, 24, 32, 44.1, 48, 96 kHz...)
/// each of the `to / gcd` phases gets its own exactly computed taps. Taps of every phase are
/// normalised to sum to one so that DC passes unchanged. Samples outside the input count as zero.
/// Rate pairs whose exact table would be very large (e.g. 44 101 Hz) use 512 evenly spaced
/// phases instead and blend the two nearest linearly (kernel error below 1e-6).
/// All arithmetic is f64 in a fixed order, so results are deterministic.
///
/// liquid-audio itself resamples with `torchaudio.functional.resample` defaults (Hann-windowed
/// sinc, 6 zero crossings, roll-off 0.99); this filter is longer and sharper, so for inputs not
/// already at 16 kHz the two differ slightly, mostly near the 8 kHz band edge.
///
/// The output has `ceil(len * to / from)` samples: every output instant that falls inside the
/// input. When `from == to` the input is returned unchanged, bit for bit. Rates outside
/// [`MIN_SAMPLE_RATE`]`..=`[`MAX_SAMPLE_RATE`] are refused with
/// [`AudioError::UnsupportedFormat`].
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, AudioError> {
    if from == to && from != 0 {
        return Ok(samples.to_vec());
    }
    check_rate(from)?;
    check_rate(to)?;
    if samples.is_empty() {
        return Ok(Vec::new());
    }
    let g = gcd(u64::from(from), u64::from(to));
    let up = u64::from(to) / g; // phases
    let down = u64::from(from) / g;
    let n_in = samples.len() as u64;
    let n_out = (n_in * up).div_ceil(down) as usize;

    let kernel = Kernel::new(from, to);
    // Taps j in -(reach-1)..=reach around floor(t) cover every |x| < half_width.
    let reach = kernel.half_width.ceil() as i64 + 1;
    let n_taps = (2 * reach) as usize;
    let input: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();

    let table_len = (up as usize).saturating_mul(n_taps);
    let mut out = Vec::with_capacity(n_out);
    if table_len <= MAX_PHASE_TABLE {
        let table = phase_table(&kernel, up as usize, n_taps, reach);
        for n in 0..n_out as u64 {
            let pos = n * down;
            let base = (pos / up) as i64;
            let phase = (pos % up) as usize;
            let taps = &table[phase * n_taps..(phase + 1) * n_taps];
            out.push(dot(&input, base - (reach - 1), taps) as f32);
        }
    } else {
        // Too many exact phases: tabulate INTERP_PHASES + 1 evenly spaced phases and blend the
        // two neighbours of each output instant linearly (taps of each phase sum to one, so any
        // blend does too).
        let mut table = phase_table(&kernel, INTERP_PHASES, n_taps, reach);
        table.extend(phase_taps(&kernel, 1.0, n_taps, reach));
        for n in 0..n_out as u64 {
            let pos = n * down;
            let base = (pos / up) as i64;
            let s = (pos % up) as f64 / up as f64 * INTERP_PHASES as f64;
            let q = (s.floor() as usize).min(INTERP_PHASES - 1);
            let a = s - q as f64;
            let lo = &table[q * n_taps..(q + 1) * n_taps];
            let hi = &table[(q + 1) * n_taps..(q + 2) * n_taps];
            let start = base - (reach - 1);
            let y = (1.0 - a) * dot(&input, start, lo) + a * dot(&input, start, hi);
            out.push(y as f32);
        }
    }
    Ok(out)
}

/// Normalised taps of the kernel at fractional offset `frac` (0 <= frac <= 1) for taps
/// j in -(reach-1)..=reach.
fn phase_taps(kernel: &Kernel, frac: f64, n_taps: usize, reach: i64) -> Vec<f64> {
    let mut taps: Vec<f64> = (0..n_taps)
        .map(|i| kernel.eval(frac - (i as i64 - (reach - 1)) as f64))
        .collect();
    normalise(&mut taps);
    taps
}

/// `phases` evenly spaced phases k/phases (k = 0..phases), each `n_taps` wide, concatenated.
fn phase_table(kernel: &Kernel, phases: usize, n_taps: usize, reach: i64) -> Vec<f64> {
    (0..phases)
        .flat_map(|k| phase_taps(kernel, k as f64 / phases as f64, n_taps, reach))
        .collect()
}

fn normalise(taps: &mut [f64]) {
    let sum: f64 = taps.iter().sum();
    if sum != 0.0 {
        for tap in taps.iter_mut() {
            *tap /= sum;
        }
    }
}

/// `sum(input[start + i] * taps[i])`, with input outside its bounds read as zero.
fn dot(input: &[f64], start: i64, taps: &[f64]) -> f64 {
    let lo = start.max(0);
    let hi = (start + taps.len() as i64).min(input.len() as i64);
    if hi <= lo {
        return 0.0;
    }
    let xs = &input[lo as usize..hi as usize];
    let ts = &taps[(lo - start) as usize..(hi - start) as usize];
    // Four independent partial sums: a fixed order (deterministic) that the compiler can
    // vectorise.
    let mut acc = [0.0f64; 4];
    let mut xc = xs.chunks_exact(4);
    let mut tc = ts.chunks_exact(4);
    for (x, t) in (&mut xc).zip(&mut tc) {
        for k in 0..4 {
            acc[k] += x[k] * t[k];
        }
    }
    let mut tail = 0.0;
    for (x, t) in xc.remainder().iter().zip(tc.remainder()) {
        tail += x * t;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Writes mono 32-bit float WAV data at `sample_rate` to a seekable writer.
///
/// Non-finite samples are refused ([`AudioError::NonFinite`]) rather than written, since players
/// and downstream tools treat them inconsistently.
pub fn write_wav_f32<W: Write + Seek>(
    writer: W,
    samples: &[f32],
    sample_rate: u32,
) -> Result<(), AudioError> {
    if sample_rate == 0 {
        return Err(AudioError::UnsupportedFormat("sample rate is 0".into()));
    }
    if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
        return Err(AudioError::NonFinite { index });
    }
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let write_err = |e: hound::Error| AudioError::Write(e.to_string());
    let mut wav = hound::WavWriter::new(writer, spec).map_err(write_err)?;
    for &s in samples {
        wav.write_sample(s).map_err(write_err)?;
    }
    wav.finalize().map_err(write_err)
}

/// Encodes 24 kHz mono audio (the detokenizer's output) as 32-bit float WAV bytes.
pub fn encode_wav_24k(samples: &[f32]) -> Result<Vec<u8>, AudioError> {
    let mut cursor = Cursor::new(Vec::with_capacity(44 + samples.len() * 4));
    write_wav_f32(&mut cursor, samples, OUTPUT_SAMPLE_RATE)?;
    Ok(cursor.into_inner())
}

/// Writes 24 kHz mono audio (the detokenizer's output) to a 32-bit float WAV file.
pub fn write_wav_file_24k(path: &Path, samples: &[f32]) -> Result<(), AudioError> {
    let io_err = |source| AudioError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(io_err)?;
    let mut writer = BufWriter::new(file);
    write_wav_f32(&mut writer, samples, OUTPUT_SAMPLE_RATE)?;
    writer.flush().map_err(io_err)
}
