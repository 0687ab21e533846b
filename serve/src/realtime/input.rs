//! The input audio buffer: PCM16 samples appended as the client streams them, kept until a
//! commit turns them into a question (so a commit waits for no upload), bounded by the
//! engine's longest question.

use super::error::EventError;

/// The audio appended since the last commit or clear.
#[derive(Debug, Default)]
pub struct InputBuffer {
    samples: Vec<i16>,
    /// Samples the socket received before `samples[0]` (committed, cleared or dropped).
    offset: u64,
    rate: u32,
    max_samples: usize,
}

/// Milliseconds of `samples` at `rate`.
pub fn ms_of(samples: u64, rate: u32) -> u64 {
    samples * 1000 / u64::from(rate.max(1))
}

/// Samples of `ms` at `rate`.
pub fn samples_of(ms: u64, rate: u32) -> u64 {
    ms * u64::from(rate) / 1000
}

/// Little-endian PCM16 bytes as samples; an odd byte count is refused.
pub fn pcm16_samples(bytes: &[u8]) -> Result<Vec<i16>, EventError> {
    if !bytes.len().is_multiple_of(2) {
        return Err(EventError::invalid(
            "invalid_audio",
            format!(
                "{} bytes of audio: PCM16 takes 2 bytes per sample",
                bytes.len()
            ),
        )
        .at("audio"));
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect())
}

impl InputBuffer {
    /// An empty buffer at `rate` holding at most `max_seconds` of audio.
    pub fn new(rate: u32, max_seconds: f64) -> InputBuffer {
        InputBuffer {
            samples: Vec::new(),
            offset: 0,
            rate,
            max_samples: (max_seconds.max(0.0) * f64::from(rate)) as usize,
        }
    }

    /// The sample rate.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no audio is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Milliseconds held.
    pub fn ms(&self) -> u64 {
        ms_of(self.samples.len() as u64, self.rate)
    }

    /// Samples the socket received in all (what the VAD's milliseconds count from).
    pub fn received(&self) -> u64 {
        self.offset + self.samples.len() as u64
    }

    /// Whether `n` more samples fit.
    pub fn check_room(&self, n: usize) -> Result<(), EventError> {
        if self.samples.len() + n > self.max_samples {
            return Err(EventError::invalid(
                "input_audio_buffer_full",
                format!(
                    "appending {} ms to the {} ms held would pass the longest question this \
                     server takes ({} ms): commit or clear the buffer first",
                    ms_of(n as u64, self.rate),
                    self.ms(),
                    ms_of(self.max_samples as u64, self.rate)
                ),
            )
            .at("audio"));
        }
        Ok(())
    }

    /// Appends `samples` (checked with [`InputBuffer::check_room`]).
    pub fn append(&mut self, samples: &[i16]) -> Result<(), EventError> {
        self.check_room(samples.len())?;
        self.samples.extend_from_slice(samples);
        Ok(())
    }

    /// Takes everything held.
    pub fn take_all(&mut self) -> Vec<i16> {
        self.offset += self.samples.len() as u64;
        std::mem::take(&mut self.samples)
    }

    /// Takes the audio from `start_ms` to `end_ms` (ms of all audio received, as the VAD
    /// counts them), dropping everything before `end_ms`; the audio after it stays.
    pub fn take_range(&mut self, start_ms: u64, end_ms: u64) -> Vec<i16> {
        let (a, b) = self.indices(start_ms, end_ms);
        let turn = self.samples[a..b].to_vec();
        self.samples.drain(..b);
        self.offset += b as u64;
        turn
    }

    /// The audio [`InputBuffer::take_range`] would take, left in the buffer.
    pub fn copy_range(&self, start_ms: u64, end_ms: u64) -> Vec<i16> {
        let (a, b) = self.indices(start_ms, end_ms);
        self.samples[a..b].to_vec()
    }

    /// The held samples from `start_ms` to `end_ms` (at least `start_ms`), as indices.
    fn indices(&self, start_ms: u64, end_ms: u64) -> (usize, usize) {
        let to_index = |ms: u64| {
            let s = samples_of(ms, self.rate).saturating_sub(self.offset);
            (s as usize).min(self.samples.len())
        };
        (to_index(start_ms), to_index(end_ms.max(start_ms)))
    }

    /// Drops everything held.
    pub fn clear(&mut self) {
        self.take_all();
    }

    /// A new rate (an empty buffer only: the caller refuses a change while audio is held).
    pub fn set_rate(&mut self, rate: u32, max_seconds: f64) {
        let received_ms = ms_of(self.received(), self.rate);
        *self = InputBuffer::new(rate, max_seconds);
        self.offset = samples_of(received_ms, rate);
    }
}

/// A mono PCM16 WAV of `samples` at `rate`: the question as the engine and the conversation's
/// history take it.
pub fn wav_of(samples: &[i16], rate: u32) -> Vec<u8> {
    crate::audio_io::wav_i16(samples, rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_cut_in_the_socket_s_time_and_the_rest_stays() {
        let mut b = InputBuffer::new(1000, 10.0);
        b.append(&(0..500).map(|i| i as i16).collect::<Vec<_>>())
            .unwrap();
        // A copy leaves the buffer as it was; the take then gives the same samples.
        assert_eq!(b.copy_range(100, 200), (100..200).collect::<Vec<i16>>());
        assert_eq!(b.len(), 500);
        assert_eq!(b.take_range(100, 200), (100..200).collect::<Vec<i16>>());
        assert_eq!(b.len(), 300);
        b.append(&[7; 100]).unwrap();
        assert_eq!(b.received(), 600);
        let next = b.take_range(450, 550);
        assert_eq!(next.len(), 100);
        assert_eq!(next[0], 450);
        assert_eq!(next[99], 7);
    }

    #[test]
    fn the_buffer_refuses_audio_past_its_bound_and_keeps_what_it_had() {
        let mut b = InputBuffer::new(1000, 1.0);
        b.append(&[1; 900]).unwrap();
        let e = b.append(&[1; 200]).unwrap_err();
        assert_eq!(e.code, "input_audio_buffer_full");
        assert_eq!(b.len(), 900);
        assert!(pcm16_samples(&[1, 2, 3]).is_err());
        assert_eq!(pcm16_samples(&[1, 0, 255, 255]).unwrap(), vec![1, -1]);
    }

    #[test]
    fn the_wav_holds_the_samples_as_given() {
        let w = wav_of(&[1, -2, 3], 24_000);
        assert_eq!(w.len(), 44 + 6);
        assert_eq!(&w[44..], &[1, 0, 254, 255, 3, 0]);
        assert_eq!(u32::from_le_bytes(w[24..28].try_into().unwrap()), 24_000);
    }
}
