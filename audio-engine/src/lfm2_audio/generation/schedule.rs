//! Which modality each generated step takes, as liquid-audio's `generate_sequential` (TTS),
//! `generate_interleaved` (speech-to-speech) and its ASR (text until the turn ends) decide it.
//!
//! The schedule is a small state machine kept apart from the model so its rules are testable
//! on their own: the session asks [`Schedule::next`] what the coming step is, runs the backbone
//! (text logits or a depthformer frame), and reports the outcome with [`Schedule::text`] or
//! [`Schedule::frame`].

/// What the next step produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modality {
    /// A text token, from the backbone's logits.
    Text,
    /// An audio frame, from the depthformer on the backbone's final-norm hidden state.
    Audio,
}

/// What happens after a text token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextOutcome {
    /// The token is a reply step; generation goes on.
    Keep,
    /// The token is a reply step and ends the reply (sequential `<|im_end|>`).
    KeepAndStop,
    /// The token ends the reply and is not a reply step (interleaved `<|im_end|>`).
    Stop,
}

/// The token ids the schedule reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleTokens {
    /// `<|im_end|>`.
    pub im_end: u32,
    /// `<|audio_start|>`.
    pub audio_start: u32,
    /// `<|text_end|>`.
    pub text_end: u32,
    /// The end-of-audio code (codebook size - 1).
    pub end_of_audio: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TextOnly,
    Sequential,
    Interleaved { n_text: usize, n_audio: usize },
}

/// The modality schedule of one reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    kind: Kind,
    tokens: ScheduleTokens,
    current: Modality,
    left: usize,
    text_done: bool,
}

impl Schedule {
    /// Text only (ASR): text steps until `<|im_end|>` or `<|audio_start|>` (the model wants to
    /// speak; a transcript stops there), both kept as the last reply step.
    pub fn text_only(tokens: ScheduleTokens) -> Schedule {
        Schedule {
            kind: Kind::TextOnly,
            tokens,
            current: Modality::Text,
            left: 0,
            text_done: false,
        }
    }

    /// Whether the schedule can ask for frames (all but [`Schedule::text_only`]).
    pub fn speaks(&self) -> bool {
        self.kind != Kind::TextOnly
    }

    /// Sequential (TTS): text until `<|audio_start|>`, frames until end of audio, then text
    /// until `<|im_end|>` (which is kept as a reply step).
    pub fn sequential(tokens: ScheduleTokens) -> Schedule {
        Schedule {
            kind: Kind::Sequential,
            tokens,
            current: Modality::Text,
            left: 0,
            text_done: false,
        }
    }

    /// Interleaved (speech-to-speech): `n_text` text steps then `n_audio` frames, repeated;
    /// `<|text_end|>` switches to audio for good; an end-of-audio frame gives one text step;
    /// `<|im_end|>` ends the reply and is not a reply step.
    pub fn interleaved(tokens: ScheduleTokens, n_text: usize, n_audio: usize) -> Schedule {
        Schedule {
            kind: Kind::Interleaved { n_text, n_audio },
            tokens,
            current: Modality::Text,
            left: n_text,
            text_done: false,
        }
    }

    /// The modality of the coming step.
    pub fn next(&self) -> Modality {
        self.current
    }

    /// Records a text step's token.
    pub fn text(&mut self, token: u32) -> TextOutcome {
        let t = self.tokens;
        match self.kind {
            Kind::TextOnly => {
                if token == t.im_end || token == t.audio_start {
                    return TextOutcome::KeepAndStop;
                }
                TextOutcome::Keep
            }
            Kind::Sequential => {
                if token == t.im_end {
                    return TextOutcome::KeepAndStop;
                }
                if token == t.audio_start {
                    self.current = Modality::Audio;
                }
                TextOutcome::Keep
            }
            Kind::Interleaved { n_audio, .. } => {
                // why: liquid-audio counts the step down before it looks at the token.
                self.left = self.left.saturating_sub(1);
                if token == t.im_end {
                    return TextOutcome::Stop;
                }
                if token == t.text_end {
                    self.text_done = true;
                }
                if self.left == 0 || self.text_done {
                    self.current = Modality::Audio;
                    self.left = n_audio;
                }
                TextOutcome::Keep
            }
        }
    }

    /// Records an audio step's frame; returns the frame as it enters the reply (all codes
    /// end-of-audio when codebook 0 picked end of audio).
    pub fn frame(&mut self, mut codes: Vec<u32>) -> Vec<u32> {
        let eoa = self.tokens.end_of_audio;
        if let Kind::Interleaved { n_text, .. } = self.kind {
            self.left = self.left.saturating_sub(1);
            if self.left == 0 && !self.text_done {
                self.current = Modality::Text;
                self.left = n_text;
            }
        }
        if codes.first() == Some(&eoa) {
            codes.iter_mut().for_each(|c| *c = eoa);
            // why: liquid-audio switches to text here without resetting the countdown, so an
            // interleaved reply whose text is done gets exactly one text step.
            self.current = Modality::Text;
        }
        codes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: ScheduleTokens = ScheduleTokens {
        im_end: 7,
        audio_start: 128,
        text_end: 130,
        end_of_audio: 2048,
    };

    #[test]
    fn interleaved_follows_six_text_twelve_audio() {
        let mut s = Schedule::interleaved(T, 6, 12);
        let mut kinds = Vec::new();
        for _ in 0..40 {
            let m = s.next();
            kinds.push(m);
            match m {
                Modality::Text => assert_eq!(s.text(500), TextOutcome::Keep),
                Modality::Audio => {
                    s.frame(vec![1; 8]);
                }
            }
        }
        let expect: Vec<Modality> = (0..40)
            .map(|i| {
                if i % 18 < 6 {
                    Modality::Text
                } else {
                    Modality::Audio
                }
            })
            .collect();
        assert_eq!(kinds, expect);
    }

    #[test]
    fn text_end_switches_to_audio_and_end_of_audio_gives_one_text_step() {
        let mut s = Schedule::interleaved(T, 6, 12);
        assert_eq!(s.text(500), TextOutcome::Keep);
        assert_eq!(s.text(130), TextOutcome::Keep);
        // Audio from now on, past the 12-frame block.
        for _ in 0..20 {
            assert_eq!(s.next(), Modality::Audio);
            assert_eq!(s.frame(vec![3; 8]), vec![3; 8]);
        }
        // End of audio: the frame is all 2048, then one text step, then audio again.
        assert_eq!(s.frame(vec![2048, 5, 6, 7, 8, 9, 10, 11]), vec![2048; 8]);
        assert_eq!(s.next(), Modality::Text);
        assert_eq!(s.text(501), TextOutcome::Keep);
        assert_eq!(s.next(), Modality::Audio);
        // im_end in a text step stops without being a step.
        s.frame(vec![2048; 8]);
        assert_eq!(s.text(7), TextOutcome::Stop);
    }

    #[test]
    fn sequential_audio_between_audio_start_and_end_of_audio() {
        let mut s = Schedule::sequential(T);
        assert_eq!(s.next(), Modality::Text);
        assert_eq!(s.text(300), TextOutcome::Keep);
        assert_eq!(s.text(128), TextOutcome::Keep);
        assert_eq!(s.next(), Modality::Audio);
        s.frame(vec![4; 8]);
        assert_eq!(s.next(), Modality::Audio);
        assert_eq!(s.frame(vec![2048, 1, 1, 1, 1, 1, 1, 1]), vec![2048; 8]);
        assert_eq!(s.next(), Modality::Text);
        assert_eq!(s.text(7), TextOutcome::KeepAndStop);
    }

    #[test]
    fn text_only_never_speaks_and_stops_at_im_end_or_audio_start() {
        for stop in [7, 128] {
            let mut s = Schedule::text_only(T);
            assert!(!s.speaks());
            for t in [300, 301, 5, 2048] {
                assert_eq!(s.next(), Modality::Text);
                assert_eq!(s.text(t), TextOutcome::Keep);
            }
            assert_eq!(s.text(stop), TextOutcome::KeepAndStop);
        }
        assert!(Schedule::sequential(T).speaks());
    }
}
