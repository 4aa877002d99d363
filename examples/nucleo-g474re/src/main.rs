//! The io-board example node on a NUCLEO-G474RE: one embassy task runs fcan-embassy's
//! loop over FDCAN1 (PA11 = FDCAN1_RX, PA12 = FDCAN1_TX, alternate function 9), CAN FD
//! with bit-rate switching. The board has no CAN transceiver: wire one (3.3 V, CAN FD
//! rated for 2 Mbit/s) to PA11/PA12, see docs/firmware-rust-chips.md.
//!
//! - **Clocks**: HSE 24 MHz crystal (X3 on the MB1367 board) → PLL: /6 = 4 MHz, ×80 =
//!   320 MHz VCO; R /2 = 160 MHz system clock (Range 1 boost), Q /4 = 80 MHz FDCAN
//!   kernel clock. HSI48 for the RNG that draws the boot id.
//! - **Bit timing** (80 MHz kernel clock, one prescaler for both phases, as CiA 601
//!   recommends): prescaler 2 → 25 ns time quantum. Nominal 500 kbit/s: 80 tq = 1 + 63
//!   + 16, sample point 80 %, SJW 16. Data 2 Mbit/s: 20 tq = 1 + 14 + 5, sample point
//!   75 %, SJW 4. embassy-stm32 0.6 does not program transceiver delay compensation on
//!   the G4; at 2 Mbit/s (500 ns bits, sampled at 375 ns) a transceiver's loop delay of
//!   up to ~200 ns needs none.
//! - **Node**: id 5 (a real board reads address switches), boot id from the RNG, every
//!   instance wired; `Controller::Fd`.
//! - **LED LD2** (PA5) shows digital output 0.
//!
//! Nothing here has run on hardware; it builds (`cargo build --release`).
#![no_std]
#![no_main]

use core::num::{NonZeroU16, NonZeroU8};

use embassy_executor::Spawner;
use embassy_stm32::can::config::{DataBitTiming, FrameTransmissionConfig, NominalBitTiming};
use embassy_stm32::can::{self, CanConfigurator};
use embassy_stm32::gpio::{Level, Output, Speed};
use embassy_stm32::peripherals::{FDCAN1, RNG};
use embassy_stm32::rng::{self, Rng};
use embassy_stm32::time::Hertz;
use embassy_stm32::bind_interrupts;
use fcan_embassy::stm32_fdcan::{self, FdCan};
use fcan_embassy::{run_node, CanPort, EmbassyClock, Fd, Firmware, RunConfig};
use fcan_example_io_board::{gen, IoBoard};
use fcan_runtime_nostd::fcan_core::frame::Frame;
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::fcan_core::timing::reached;
use fcan_runtime_nostd::Transmit;
use panic_halt as _;

bind_interrupts!(struct Irqs {
    FDCAN1_IT0 => can::IT0InterruptHandler<FDCAN1>;
    FDCAN1_IT1 => can::IT1InterruptHandler<FDCAN1>;
    RNG => rng::InterruptHandler<RNG>;
});

/// This board's node id.
const NODE_ID: u8 = 5;

/// The application's own tick: the io-board polls its inputs, relays and analog
/// sampling from `poll`, so the loop wakes at least this often besides the node's
/// deadlines.
const APP_TICK_US: u32 = 1_000;

/// The io-board firmware and the LED, as the loop drives them.
struct Board {
    io: IoBoard,
    led: Output<'static>,
}

impl Firmware for Board {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.io.receive(frame, now_us);
    }

    fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.io.poll(now_us, tx);
        match self.io.output(0) {
            Some(true) => self.led.set_high(),
            _ => self.led.set_low(),
        }
    }

    fn poll_at(&self, now_us: u32) -> Option<u32> {
        let tick = now_us.wrapping_add(APP_TICK_US);
        Some(match self.io.node.poll_at(now_us) {
            Some(t) if !reached(t, tick) => t,
            _ => tick,
        })
    }
}

fn clocks() -> embassy_stm32::Config {
    use embassy_stm32::rcc::*;
    let mut config = embassy_stm32::Config::default();
    config.rcc.hse = Some(Hse {
        freq: Hertz(24_000_000),
        mode: HseMode::Oscillator,
    });
    config.rcc.pll = Some(Pll {
        source: PllSource::HSE,
        prediv: PllPreDiv::DIV6,
        mul: PllMul::MUL80,
        divp: None,
        divq: Some(PllQDiv::DIV4),
        divr: Some(PllRDiv::DIV2),
    });
    config.rcc.sys = Sysclk::PLL1_R;
    config.rcc.boost = true;
    config.rcc.mux.fdcansel = mux::Fdcansel::PLL1_Q;
    config.rcc.hsi48 = Some(Hsi48Config {
        sync_from_usb: false,
    });
    config.rcc.mux.clk48sel = mux::Clk48sel::HSI48;
    config
}

/// A non-zero constant, checked at compile time.
const fn nz8(v: u8) -> NonZeroU8 {
    match NonZeroU8::new(v) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

const fn nz16(v: u16) -> NonZeroU16 {
    match NonZeroU16::new(v) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

/// 500 kbit/s at 80 MHz: prescaler 2, 1 + 63 + 16 = 80 tq, sample point 80 %.
const NOMINAL: NominalBitTiming = NominalBitTiming {
    prescaler: nz16(2),
    seg1: nz8(63),
    seg2: nz8(16),
    sync_jump_width: nz8(16),
};

/// 2 Mbit/s at 80 MHz: prescaler 2, 1 + 14 + 5 = 20 tq, sample point 75 %.
const DATA: DataBitTiming = DataBitTiming {
    transceiver_delay_compensation: false,
    prescaler: nz16(2),
    seg1: nz8(14),
    seg2: nz8(5),
    sync_jump_width: nz8(4),
};

#[embassy_executor::main]
async fn main(_spawner: Spawner) {
    let p = embassy_stm32::init(clocks());
    let led = Output::new(p.PA5, Level::Low, Speed::Low);
    let boot_id = Rng::new(p.RNG, Irqs).next_u32();

    let mut fdcan = CanConfigurator::new(p.FDCAN1, p.PA11, p.PA12, Irqs);
    let config = fdcan
        .config()
        .set_nominal_bit_timing(NOMINAL)
        .set_data_bit_timing(DATA)
        .set_frame_transmit(FrameTransmissionConfig::AllowFdCanAndBRS);
    fdcan.set_config(stm32_fdcan::config(config));
    let port = Fd(FdCan::new(fdcan.into_normal_mode()));

    let Some(node_id) = NodeId::new(NODE_ID) else {
        panic!("node id");
    };
    let config = gen::Config {
        node_id,
        boot_id,
        counts: gen::Counts::MAX,
        controller: <Fd<FdCan<'static>> as CanPort>::CONTROLLER,
    };
    let Ok(io) = IoBoard::new(config) else {
        panic!("node configuration");
    };
    let mut board = Board { io, led };
    run_node(&mut board, port, EmbassyClock, RunConfig::default()).await
}
