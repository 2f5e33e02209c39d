//! Time-varying device metrics, read from the device timeline.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong};

use super::device::{CLOCK_GRAPHICS, CLOCK_MEM, CLOCK_SM, CLOCK_VIDEO};
use crate::call::{get, on_device, put, supported};
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT, NOT_SUPPORTED, NvmlDevice, NvmlReturn,
    TEMPERATURE_V1_VERSION, TemperatureV1, UNKNOWN, Utilization,
};

/// Sampling period reported by the encoder/decoder utilisation calls (µs).
pub const CODEC_SAMPLING_PERIOD_US: c_uint = 167_000;

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    utilization: *mut Utilization,
) -> NvmlReturn {
    on_device("nvmlDeviceGetUtilizationRates", device, |ctx, d| {
        // nvml.h: "On MIG-enabled GPUs, querying device utilization rates is not currently
        // supported." (A MIG device's handle is refused by `on_device` the same way.)
        if crate::mig::mig_enabled(d) {
            return Err(NOT_SUPPORTED);
        }
        let p = ctx.point()?;
        let rates = Utilization {
            gpu: supported(p.gpu_util)?,
            memory: supported(p.mem_util)?,
        };
        put(utilization, rates)
    })
}

/// Only sensor 0 (`NVML_TEMPERATURE_GPU`) exists.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperature(
    device: NvmlDevice,
    sensorType: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetTemperature", device, |ctx, _| {
        if sensorType != 0 {
            return Err(INVALID_ARGUMENT);
        }
        put(temp, supported(ctx.point()?.temperature)?)
    })
}

/// Versioned temperature: `version` must be `0x0100000C` (else 25), `sensorType` 0 (else 2);
/// the value is the timeline's `temperature`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTemperatureV(
    device: NvmlDevice,
    temperature: *mut TemperatureV1,
) -> NvmlReturn {
    on_device("nvmlDeviceGetTemperatureV", device, |ctx, _| {
        let mut t = get(temperature.cast_const())?;
        if t.version != TEMPERATURE_V1_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        if t.sensor_type != 0 {
            return Err(INVALID_ARGUMENT);
        }
        let value = supported(ctx.point()?.temperature)?;
        t.temperature = i32::try_from(value).map_err(|_| UNKNOWN)?;
        put(temperature, t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPowerUsage(device: NvmlDevice, power: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetPowerUsage", device, |ctx, _| {
        put(power, supported(ctx.point()?.power)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetClockInfo(
    device: NvmlDevice,
    type_: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetClockInfo", device, |ctx, _| {
        let p = ctx.point()?;
        let v = match type_ {
            CLOCK_GRAPHICS => p.graphics_clock.or(p.sm_clock),
            CLOCK_SM => p.sm_clock,
            CLOCK_MEM => p.mem_clock,
            CLOCK_VIDEO => p.video_clock,
            _ => return Err(INVALID_ARGUMENT),
        };
        put(clock, supported(v)?)
    })
}

/// `fan` must be below `num_fans`; no fans -> NotSupported.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetFanSpeed_v2(
    device: NvmlDevice,
    fan: c_uint,
    speed: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetFanSpeed_v2", device, |ctx, d| {
        let fans = supported(d.num_fans)?;
        if fans == 0 {
            return Err(NOT_SUPPORTED);
        }
        if fan >= fans {
            return Err(INVALID_ARGUMENT);
        }
        put(speed, supported(ctx.point()?.fan)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetFanSpeed(device: NvmlDevice, speed: *mut c_uint) -> NvmlReturn {
    on_device("nvmlDeviceGetFanSpeed", device, |ctx, d| {
        if d.num_fans == Some(0) {
            return Err(NOT_SUPPORTED);
        }
        put(speed, supported(ctx.point()?.fan)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: NvmlDevice,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetEncoderUtilization", device, |ctx, _| {
        let v = supported(ctx.point()?.encoder)?;
        put(utilization, v)?;
        put(samplingPeriodUs, CODEC_SAMPLING_PERIOD_US)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: NvmlDevice,
    utilization: *mut c_uint,
    samplingPeriodUs: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetDecoderUtilization", device, |ctx, _| {
        let v = supported(ctx.point()?.decoder)?;
        put(utilization, v)?;
        put(samplingPeriodUs, CODEC_SAMPLING_PERIOD_US)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: NvmlDevice,
    clocksThrottleReasons: *mut c_ulonglong,
) -> NvmlReturn {
    on_device(
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        device,
        |ctx, _| {
            put(
                clocksThrottleReasons,
                supported(ctx.point()?.throttle_reasons)?,
            )
        },
    )
}

/// Error type: corrected 0 / uncorrected 1; counter: volatile 0 / aggregate 1
/// (both counters report the same timeline value).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: NvmlDevice,
    errorType: c_uint,
    counterType: c_uint,
    eccCounts: *mut c_ulonglong,
) -> NvmlReturn {
    on_device("nvmlDeviceGetTotalEccErrors", device, |ctx, _| {
        if counterType > 1 {
            return Err(INVALID_ARGUMENT);
        }
        let p = ctx.point()?;
        let v = match errorType {
            0 => p.ecc_corrected,
            1 => p.ecc_uncorrected,
            _ => return Err(INVALID_ARGUMENT),
        };
        put(eccCounts, supported(v)?)
    })
}

/// Counter: TX 0 / RX 1; KB/s.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPcieThroughput(
    device: NvmlDevice,
    counter: c_uint,
    value: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetPcieThroughput", device, |ctx, _| {
        let p = ctx.point()?;
        let v = match counter {
            0 => p.pcie_tx,
            1 => p.pcie_rx,
            _ => return Err(INVALID_ARGUMENT),
        };
        put(value, supported(v)?)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetPerformanceState(
    device: NvmlDevice,
    pState: *mut c_uint,
) -> NvmlReturn {
    on_device("nvmlDeviceGetPerformanceState", device, |ctx, _| {
        put(pState, supported(ctx.point()?.pstate)?)
    })
}
