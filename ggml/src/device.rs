//! Which device a model runs on: a typed spec parsed from `cpu`, `vulkan:N`, `cuda:N` or
//! `metal`, and its errors. [`Backend::for_device`](super::Backend::for_device) (in
//! `device_open.rs`) opens one or says why it cannot.
//!
//! A device is looked up in ggml's backend registry by its registry's name (`CPU`, `Vulkan`,
//! `CUDA`, `MTL`) and its index among that registry's devices, so `vulkan:1` is the second
//! Vulkan device ggml enumerates whatever else is registered.

use std::ffi::CStr;
use std::fmt;
use std::str::FromStr;

/// A compute device, as a user names it (`cpu`, `vulkan:0`, `cuda:1`, `metal`).
///
/// [`Display`](fmt::Display) writes the form [`FromStr`] reads (`vulkan:0`; a bare `vulkan` or
/// `cuda` parses as index 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Device {
    /// The CPU backend.
    #[default]
    Cpu,
    /// The N-th device of ggml's Vulkan backend (feature `vulkan`).
    Vulkan(usize),
    /// The N-th device of ggml's CUDA backend (feature `cuda`).
    Cuda(usize),
    /// The Metal device (feature `metal`).
    Metal,
}

impl Device {
    /// Whether this build has the backend the device needs (its cargo feature).
    pub fn is_compiled_in(self) -> bool {
        match self {
            Device::Cpu => true,
            Device::Vulkan(_) => cfg!(feature = "vulkan"),
            Device::Cuda(_) => cfg!(feature = "cuda"),
            Device::Metal => cfg!(feature = "metal"),
        }
    }

    /// The cargo feature that compiles the device's backend in (`None` for the CPU).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Device::Cpu => None,
            Device::Vulkan(_) => Some("vulkan"),
            Device::Cuda(_) => Some("cuda"),
            Device::Metal => Some("metal"),
        }
    }

    /// The backend's name for people (`Vulkan`, `CUDA`, ...).
    pub fn backend_name(self) -> &'static str {
        match self {
            Device::Cpu => "CPU",
            Device::Vulkan(_) => "Vulkan",
            Device::Cuda(_) => "CUDA",
            Device::Metal => "Metal",
        }
    }

    /// The name of the ggml backend registry that holds the device.
    pub(super) fn registry_name(self) -> &'static CStr {
        match self {
            Device::Cpu => c"CPU",
            Device::Vulkan(_) => c"Vulkan",
            Device::Cuda(_) => c"CUDA",
            // ggml-metal registers itself as GGML_METAL_NAME.
            Device::Metal => c"MTL",
        }
    }

    /// The device's index within its registry.
    pub(super) fn index(self) -> usize {
        match self {
            Device::Vulkan(i) | Device::Cuda(i) => i,
            Device::Cpu | Device::Metal => 0,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Vulkan(i) => write!(f, "vulkan:{i}"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Metal => f.write_str("metal"),
        }
    }
}

/// A string that is not a device spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{spec:?} is not a device: {detail} (expected cpu, vulkan:N, cuda:N or metal)")]
pub struct ParseDeviceError {
    /// The string as given.
    pub spec: String,
    /// What is wrong with it.
    pub detail: &'static str,
}

impl FromStr for Device {
    type Err = ParseDeviceError;

    /// Parses `cpu`, `metal`, `vulkan[:N]` or `cuda[:N]` (ASCII case ignored, no spaces).
    fn from_str(s: &str) -> std::result::Result<Device, ParseDeviceError> {
        let err = |detail| ParseDeviceError {
            spec: s.to_owned(),
            detail,
        };
        let lower = s.to_ascii_lowercase();
        let (kind, index) = match lower.split_once(':') {
            Some((k, i)) => (k, Some(i)),
            None => (lower.as_str(), None),
        };
        let index = match index {
            None => None,
            // why digits only: `usize::from_str` takes a leading `+`, which no one means.
            Some(i) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => {
                Some(i.parse::<usize>().map_err(|_| err("index too large"))?)
            }
            Some(_) => return Err(err("the index must be a decimal number")),
        };
        match (kind, index) {
            ("cpu", None) => Ok(Device::Cpu),
            ("metal", None) => Ok(Device::Metal),
            ("cpu" | "metal", Some(_)) => Err(err("this device takes no index")),
            ("vulkan", i) => Ok(Device::Vulkan(i.unwrap_or(0))),
            ("cuda", i) => Ok(Device::Cuda(i.unwrap_or(0))),
            _ => Err(err("unknown device kind")),
        }
    }
}

/// Why [`Backend::for_device`](super::Backend::for_device) cannot open a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The build lacks the device's backend.
    #[error("{device}: this build has no {} backend (feature `{feature}`)", .device.backend_name())]
    NotCompiledIn {
        /// The device asked for.
        device: Device,
        /// The cargo feature that would compile it in.
        feature: &'static str,
    },
    /// The backend is compiled in but has no device with that index.
    #[error(
        "{device}: no such device; {} devices found: {}{hint}",
        .device.backend_name(),
        list(.found)
    )]
    NotFound {
        /// The device asked for.
        device: Device,
        /// The registry names and descriptions of the backend's devices (e.g.
        /// `Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits))`).
        found: Vec<String>,
        /// A note on why a device may be missing (empty when there is none).
        hint: &'static str,
    },
    /// The device exists but ggml could not start a backend on it.
    #[error("{device}: the backend failed to start")]
    InitFailed {
        /// The device asked for.
        device: Device,
    },
}

fn list(found: &[String]) -> String {
    if found.is_empty() {
        "none".to_owned()
    } else {
        found.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_round_trips() {
        for (s, d) in [
            ("cpu", Device::Cpu),
            ("metal", Device::Metal),
            ("vulkan:0", Device::Vulkan(0)),
            ("vulkan:3", Device::Vulkan(3)),
            ("cuda:1", Device::Cuda(1)),
        ] {
            assert_eq!(s.parse::<Device>(), Ok(d), "{s}");
            assert_eq!(d.to_string(), s);
        }
        assert_eq!("VULKAN".parse::<Device>(), Ok(Device::Vulkan(0)));
        assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
        assert_eq!("CPU".parse::<Device>(), Ok(Device::Cpu));
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for (s, why) in [
            ("", "unknown device kind"),
            ("gpu", "unknown device kind"),
            ("vulkan:", "decimal"),
            ("vulkan:-1", "decimal"),
            ("cuda:+1", "decimal"),
            ("cuda:x", "decimal"),
            (" cpu", "unknown device kind"),
            ("cpu:0", "no index"),
            ("metal:1", "no index"),
            ("vulkan:99999999999999999999999", "too large"),
        ] {
            let e = s.parse::<Device>().expect_err(s);
            assert_eq!(e.spec, s);
            let msg = e.to_string();
            assert!(msg.contains(why), "{s}: {msg}");
            assert!(msg.contains("vulkan:N"), "{msg}");
        }
    }

    #[test]
    fn not_found_message_lists_devices() {
        let e = DeviceError::NotFound {
            device: Device::Vulkan(2),
            found: vec!["Vulkan0 (llvmpipe)".into(), "Vulkan1 (other)".into()],
            hint: "",
        };
        assert_eq!(
            e.to_string(),
            "vulkan:2: no such device; Vulkan devices found: Vulkan0 (llvmpipe), Vulkan1 (other)"
        );
        let none = DeviceError::NotFound {
            device: Device::Cuda(0),
            found: vec![],
            hint: "",
        };
        assert_eq!(
            none.to_string(),
            "cuda:0: no such device; CUDA devices found: none"
        );
    }
}
