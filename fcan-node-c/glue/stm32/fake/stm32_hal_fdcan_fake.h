/*
 * stm32_hal_fdcan_fake.h: a host fake of the part of ST's STM32 HAL FDCAN driver that
 * fcan_stm32_fdcan.c uses (and the few calls a board's code around it makes), for the
 * glue's tests. Not ST's code: the names, types, fields and constant values are those of
 * the HAL's public API (the one UM2570 "Description of STM32G4 HAL and low-layer
 * drivers" documents in its FDCAN chapter), taken from ST's sources on GitHub:
 * stm32g4xx_hal_fdcan.h/.c (STMicroelectronics/stm32g4xx-hal-driver), the H7 ones, and
 * the G474 CMSIS device header for the interrupt bit positions. The behaviour is
 * modelled on what those HAL functions do with the M_CAN's registers, reduced to what
 * the glue can observe. Only the fields the glue and the tests use are declared (the
 * real FDCAN_InitTypeDef and handle have more).
 *
 * Build options (-D):
 *   FAKE_HAL_DLC_SHIFT=0   FDCAN_DLC_BYTES_n is the 4-bit DLC, as the STM32G4 HAL and the
 *                          STM32H7 HAL since v1.11.3 define it (default);
 *   FAKE_HAL_DLC_SHIFT=16  the H7 HAL before v1.11.3: the codes shifted left by 16 bits
 *                          (FDCAN_DLC_BYTES_12 = 0x00090000), and GetRxMessage's
 *                          DataLength in the same form;
 *   FAKE_HAL_OLD_PROTOTYPES=1  the prototypes before the HAL's 2023 const-correctness
 *                          change (AddMessageToTxFifoQ takes `uint8_t *`, the getters a
 *                          non-const handle).
 *
 * The simulated peripheral (FDCAN_GlobalTypeDef here, the register block in the real
 * HAL) is what the handle's Instance points to; tests drive it with the fake_fdcan_*
 * functions: put frames on the wire into the Rx FIFO 0, let the bus take frames from
 * the Tx FIFO, set the FIFO sizes, send the controller bus-off, run the interrupt.
 */
#ifndef STM32_HAL_FDCAN_FAKE_H
#define STM32_HAL_FDCAN_FAKE_H

#include <stdint.h>

#ifndef FAKE_HAL_DLC_SHIFT
#define FAKE_HAL_DLC_SHIFT 0
#endif
#ifndef FAKE_HAL_OLD_PROTOTYPES
#define FAKE_HAL_OLD_PROTOTYPES 0
#endif

#if FAKE_HAL_OLD_PROTOTYPES
#define FAKE_HAL_CONST
#else
#define FAKE_HAL_CONST const
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- stm32xxxx_hal_def.h ------------------------------------------------------- */

typedef enum { HAL_OK = 0x00U, HAL_ERROR = 0x01U, HAL_BUSY = 0x02U, HAL_TIMEOUT = 0x03U }
    HAL_StatusTypeDef;

/* ---- stm32xxxx_hal_fdcan.h: types ----------------------------------------------- */

typedef enum {
    HAL_FDCAN_STATE_RESET = 0x00U,
    HAL_FDCAN_STATE_READY = 0x01U,
    HAL_FDCAN_STATE_BUSY = 0x02U,
    HAL_FDCAN_STATE_ERROR = 0x03U
} HAL_FDCAN_StateTypeDef;

/* The fields of FDCAN_InitTypeDef the glue or the tests read (the real one has the bit
 * timing, mode, filter counts and, on the H7, the message RAM layout too). */
typedef struct {
    uint32_t FrameFormat;
    uint32_t Mode;
    uint32_t TxFifoQueueMode;
} FDCAN_InitTypeDef;

typedef struct {
    uint32_t Identifier;
    uint32_t IdType;
    uint32_t TxFrameType;
    uint32_t DataLength;
    uint32_t ErrorStateIndicator;
    uint32_t BitRateSwitch;
    uint32_t FDFormat;
    uint32_t TxEventFifoControl;
    uint32_t MessageMarker;
} FDCAN_TxHeaderTypeDef;

typedef struct {
    uint32_t Identifier;
    uint32_t IdType;
    uint32_t RxFrameType;
    uint32_t DataLength;
    uint32_t ErrorStateIndicator;
    uint32_t BitRateSwitch;
    uint32_t FDFormat;
    uint32_t RxTimestamp;
    uint32_t FilterIndex;
    uint32_t IsFilterMatchingFrame;
} FDCAN_RxHeaderTypeDef;

typedef struct {
    uint32_t LastErrorCode;
    uint32_t DataLastErrorCode;
    uint32_t Activity;
    uint32_t ErrorPassive;
    uint32_t Warning;
    uint32_t BusOff;
    uint32_t RxESIflag;
    uint32_t RxBRSflag;
    uint32_t RxFDFflag;
    uint32_t ProtocolException;
    uint32_t TDCvalue;
} FDCAN_ProtocolStatusTypeDef;

/* ---- constants (values as the G4 HAL and its CMSIS header define them) ----------- */

#define FDCAN_FRAME_CLASSIC ((uint32_t)0x00000000U)
#define FDCAN_FRAME_FD_NO_BRS ((uint32_t)0x00000100U) /* CCCR.FDOE */
#define FDCAN_FRAME_FD_BRS ((uint32_t)0x00000300U)    /* CCCR.FDOE | CCCR.BRSE */

#define FDCAN_TX_FIFO_OPERATION ((uint32_t)0x00000000U)
#define FDCAN_TX_QUEUE_OPERATION ((uint32_t)0x01000000U) /* TXBC.TFQM */

#define FDCAN_STANDARD_ID ((uint32_t)0x00000000U)
#define FDCAN_EXTENDED_ID ((uint32_t)0x40000000U)

#define FDCAN_DATA_FRAME ((uint32_t)0x00000000U)
#define FDCAN_REMOTE_FRAME ((uint32_t)0x20000000U)

#define FAKE_HAL_DLC(n) ((uint32_t)(n) << FAKE_HAL_DLC_SHIFT)
#define FDCAN_DLC_BYTES_0 FAKE_HAL_DLC(0x0U)
#define FDCAN_DLC_BYTES_1 FAKE_HAL_DLC(0x1U)
#define FDCAN_DLC_BYTES_2 FAKE_HAL_DLC(0x2U)
#define FDCAN_DLC_BYTES_3 FAKE_HAL_DLC(0x3U)
#define FDCAN_DLC_BYTES_4 FAKE_HAL_DLC(0x4U)
#define FDCAN_DLC_BYTES_5 FAKE_HAL_DLC(0x5U)
#define FDCAN_DLC_BYTES_6 FAKE_HAL_DLC(0x6U)
#define FDCAN_DLC_BYTES_7 FAKE_HAL_DLC(0x7U)
#define FDCAN_DLC_BYTES_8 FAKE_HAL_DLC(0x8U)
#define FDCAN_DLC_BYTES_12 FAKE_HAL_DLC(0x9U)
#define FDCAN_DLC_BYTES_16 FAKE_HAL_DLC(0xAU)
#define FDCAN_DLC_BYTES_20 FAKE_HAL_DLC(0xBU)
#define FDCAN_DLC_BYTES_24 FAKE_HAL_DLC(0xCU)
#define FDCAN_DLC_BYTES_32 FAKE_HAL_DLC(0xDU)
#define FDCAN_DLC_BYTES_48 FAKE_HAL_DLC(0xEU)
#define FDCAN_DLC_BYTES_64 FAKE_HAL_DLC(0xFU)

#define FDCAN_ESI_ACTIVE ((uint32_t)0x00000000U)
#define FDCAN_ESI_PASSIVE ((uint32_t)0x80000000U)

#define FDCAN_BRS_OFF ((uint32_t)0x00000000U)
#define FDCAN_BRS_ON ((uint32_t)0x00100000U)

#define FDCAN_CLASSIC_CAN ((uint32_t)0x00000000U)
#define FDCAN_FD_CAN ((uint32_t)0x00200000U)

#define FDCAN_NO_TX_EVENTS ((uint32_t)0x00000000U)
#define FDCAN_STORE_TX_EVENTS ((uint32_t)0x00800000U)

#define FDCAN_RX_FIFO0 ((uint32_t)0x00000040U)
#define FDCAN_RX_FIFO1 ((uint32_t)0x00000041U)

#define FDCAN_ACCEPT_IN_RX_FIFO0 ((uint32_t)0x00000000U)
#define FDCAN_ACCEPT_IN_RX_FIFO1 ((uint32_t)0x00000001U)
#define FDCAN_REJECT ((uint32_t)0x00000002U)
#define FDCAN_FILTER_REMOTE ((uint32_t)0x00000000U)
#define FDCAN_REJECT_REMOTE ((uint32_t)0x00000001U)

/* IR flags and IE enables share their bit positions (G4: RF0N 0, RF0F 1, RF0L 2, EP 17,
 * EW 18, BO 19). */
#define FDCAN_FLAG_RX_FIFO0_NEW_MESSAGE ((uint32_t)1U << 0)
#define FDCAN_FLAG_RX_FIFO0_FULL ((uint32_t)1U << 1)
#define FDCAN_FLAG_RX_FIFO0_MESSAGE_LOST ((uint32_t)1U << 2)
#define FDCAN_FLAG_ERROR_PASSIVE ((uint32_t)1U << 17)
#define FDCAN_FLAG_ERROR_WARNING ((uint32_t)1U << 18)
#define FDCAN_FLAG_BUS_OFF ((uint32_t)1U << 19)
#define FDCAN_IT_RX_FIFO0_NEW_MESSAGE ((uint32_t)1U << 0)
#define FDCAN_IT_RX_FIFO0_FULL ((uint32_t)1U << 1)
#define FDCAN_IT_RX_FIFO0_MESSAGE_LOST ((uint32_t)1U << 2)
#define FDCAN_IT_ERROR_PASSIVE ((uint32_t)1U << 17)
#define FDCAN_IT_ERROR_WARNING ((uint32_t)1U << 18)
#define FDCAN_IT_BUS_OFF ((uint32_t)1U << 19)

#define HAL_FDCAN_ERROR_NONE ((uint32_t)0x00000000U)
#define HAL_FDCAN_ERROR_NOT_INITIALIZED ((uint32_t)0x00000002U)
#define HAL_FDCAN_ERROR_NOT_READY ((uint32_t)0x00000004U)
#define HAL_FDCAN_ERROR_NOT_STARTED ((uint32_t)0x00000008U)
#define HAL_FDCAN_ERROR_PARAM ((uint32_t)0x00000020U)
#define HAL_FDCAN_ERROR_FIFO_EMPTY ((uint32_t)0x00000100U)
#define HAL_FDCAN_ERROR_FIFO_FULL ((uint32_t)0x00000200U)

/* ---- the simulated peripheral ---------------------------------------------------- */

/* Elements: G4 Rx FIFO 0 has 3 (fixed), Tx FIFO/queue 3; H7 up to 64 and 32. */
#define FAKE_FDCAN_MAX_ELEMENTS 64u

/* A frame as the message RAM holds it: `dlc` the 4-bit DLC (0..15; a test may put a
 * larger number to make GetRxMessage return a DataLength that is no FDCAN_DLC_BYTES_*
 * code), `data` 64 bytes whatever the DLC (an element with a 64-byte data field). */
typedef struct {
    uint32_t id;
    uint32_t xtd; /* 1: 29-bit */
    uint32_t rtr; /* 1: remote frame */
    uint32_t fdf; /* 1: FD format */
    uint32_t brs;
    uint32_t esi;
    uint32_t dlc;
    uint8_t data[64];
} fake_fdcan_element_t;

/* A frame the HAL was given to transmit: the header as passed, the bytes copied. */
typedef struct {
    FDCAN_TxHeaderTypeDef header;
    uint8_t data[64];
} fake_fdcan_tx_t;

typedef struct {
    /* Registers, as far as the fake models them. */
    uint32_t IE;
    uint32_t IR;
    uint32_t init;    /* CCCR.INIT */
    uint32_t bus_off; /* PSR.BO */
    uint32_t global_filter[4];

    /* Rx FIFO 0: `rx_size` elements (blocking mode: a frame arriving full is lost). */
    fake_fdcan_element_t rx[FAKE_FDCAN_MAX_ELEMENTS];
    uint32_t rx_size, rx_get, rx_fill;
    uint32_t rx_lost;

    /* Tx FIFO/queue: `tx_size` elements pending transmission. */
    fake_fdcan_tx_t tx[FAKE_FDCAN_MAX_ELEMENTS];
    uint32_t tx_size, tx_get, tx_fill;
    /* >= 0: HAL_FDCAN_GetTxFifoFreeLevel reports this instead (tests of the pre-check). */
    int32_t tx_free_level_override;

    /* What happened, for the tests. */
    uint32_t calls_add_message;   /* HAL_FDCAN_AddMessageToTxFifoQ calls */
    uint32_t tx_accepted;         /* ... that returned HAL_OK */
    uint32_t tx_discarded;        /* pending frames dropped by Stop (CCE) */
    uint32_t rx_discarded;        /* Rx FIFO frames dropped by Stop (CCE) */
    uint32_t stops, starts;       /* successful HAL_FDCAN_Stop / HAL_FDCAN_Start */
    uint32_t misuse;              /* calls outside what the HAL allows (see misuse_what) */
    const char *misuse_what;      /* the last one */
} FDCAN_GlobalTypeDef;

typedef struct {
    FDCAN_GlobalTypeDef *Instance;
    FDCAN_InitTypeDef Init;
    uint32_t LatestTxFifoQRequest;
    volatile HAL_FDCAN_StateTypeDef State;
    volatile uint32_t ErrorCode;
} FDCAN_HandleTypeDef;

/* ---- the HAL functions ------------------------------------------------------------ */

HAL_StatusTypeDef HAL_FDCAN_ConfigGlobalFilter(FDCAN_HandleTypeDef *hfdcan,
                                               uint32_t NonMatchingStd, uint32_t NonMatchingExt,
                                               uint32_t RejectRemoteStd,
                                               uint32_t RejectRemoteExt);
HAL_StatusTypeDef HAL_FDCAN_Start(FDCAN_HandleTypeDef *hfdcan);
HAL_StatusTypeDef HAL_FDCAN_Stop(FDCAN_HandleTypeDef *hfdcan);
HAL_StatusTypeDef HAL_FDCAN_AddMessageToTxFifoQ(FDCAN_HandleTypeDef *hfdcan,
                                                FAKE_HAL_CONST FDCAN_TxHeaderTypeDef *pTxHeader,
                                                FAKE_HAL_CONST uint8_t *pTxData);
HAL_StatusTypeDef HAL_FDCAN_GetRxMessage(FDCAN_HandleTypeDef *hfdcan, uint32_t RxLocation,
                                         FDCAN_RxHeaderTypeDef *pRxHeader, uint8_t *pRxData);
HAL_StatusTypeDef HAL_FDCAN_GetProtocolStatus(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan,
                                              FDCAN_ProtocolStatusTypeDef *ProtocolStatus);
uint32_t HAL_FDCAN_GetRxFifoFillLevel(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan,
                                      uint32_t RxFifo);
uint32_t HAL_FDCAN_GetTxFifoFreeLevel(FAKE_HAL_CONST FDCAN_HandleTypeDef *hfdcan);
HAL_StatusTypeDef HAL_FDCAN_ActivateNotification(FDCAN_HandleTypeDef *hfdcan,
                                                 uint32_t ActiveITs, uint32_t BufferIndexes);
/* The interrupt: as the HAL's, Rx FIFO 0 events (IR & IE) first, then the error status
 * ones, each group's flags cleared before its callback. */
void HAL_FDCAN_IRQHandler(FDCAN_HandleTypeDef *hfdcan);
/* Weak in the HAL; the fake's users must define them (the board's code does). */
void HAL_FDCAN_RxFifo0Callback(FDCAN_HandleTypeDef *hfdcan, uint32_t RxFifo0ITs);
void HAL_FDCAN_ErrorStatusCallback(FDCAN_HandleTypeDef *hfdcan, uint32_t ErrorStatusITs);

/* ---- test controls ---------------------------------------------------------------- */

/* Resets `inst` and `h` to what MX_FDCANx_Init (HAL_FDCAN_Init) leaves: state READY,
 * INIT set, FD with BRS, Tx FIFO mode, the G4's 3-element Rx FIFO 0 and Tx FIFO. */
void fake_fdcan_init(FDCAN_HandleTypeDef *h, FDCAN_GlobalTypeDef *inst);
/* FIFO sizes (1..FAKE_FDCAN_MAX_ELEMENTS); only while empty. */
void fake_fdcan_set_rx_size(FDCAN_GlobalTypeDef *inst, uint32_t n);
void fake_fdcan_set_tx_size(FDCAN_GlobalTypeDef *inst, uint32_t n);
/* The 4-bit DLC of a CAN FD length, independently of the HAL macros; 0xFF if none. */
uint32_t fake_fdcan_dlc_of_len(uint32_t len);
/* The HAL's DataLength code for a 4-bit DLC (FAKE_HAL_DLC_SHIFT applied). */
uint32_t fake_fdcan_hal_code(uint32_t dlc);
/* A frame arrives from the bus: into the Rx FIFO 0 and IR.RF0N set; 0, or -1 when the
 * FIFO is full (frame lost, IR.RF0L) or the controller is in INIT (not on the bus). */
int fake_fdcan_receive(FDCAN_GlobalTypeDef *inst, const fake_fdcan_element_t *e);
/* Convenience: a frame by id / flags / bytes (len a CAN FD length). */
int fake_fdcan_receive_frame(FDCAN_GlobalTypeDef *inst, uint32_t id, int extended, int fd,
                             int brs, const uint8_t *data, uint32_t len);
/* The bus sends the oldest pending Tx frame: copies it to `*out`, 1; or 0 when none is
 * pending or the controller is off the bus (INIT). */
int fake_fdcan_bus_take(FDCAN_GlobalTypeDef *inst, fake_fdcan_tx_t *out);
/* Frames pending in the Tx FIFO. */
uint32_t fake_fdcan_tx_pending(const FDCAN_GlobalTypeDef *inst);
/* The controller goes bus-off: PSR.BO and CCCR.INIT set, IR.BO raised. */
void fake_fdcan_enter_bus_off(FDCAN_GlobalTypeDef *inst);

#ifdef __cplusplus
}
#endif

#endif /* STM32_HAL_FDCAN_FAKE_H */
