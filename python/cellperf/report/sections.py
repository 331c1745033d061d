"""The report's sections in reading order: (title, item makers). A maker takes the store and
returns its `Item`s (none when the store has no data for it), so a campaign without VoIP has
no VoIP section. This registry is the one module that knows every maker; the makers import
only what lies below them (cellperf.report.item, tables, the store), never this list."""

from __future__ import annotations

from cellperf.report.apps import keystroke_latency, stream_stalls
from cellperf.report.cells import serving_cells
from cellperf.report.delay_spikes import SECTIONS as SPIKE_SECTIONS
from cellperf.report.figures import channel_table, failed_table, summary_table, tcp, udp_throughput, voip
from cellperf.report.fragmentation import SECTIONS as FRAGMENT_SECTIONS
from cellperf.report.frame_errors import SECTIONS as FRAME_ERROR_SECTIONS
from cellperf.report.handover_modes import SECTIONS as HANDOVER_MODE_SECTIONS
from cellperf.report.handover_zones import SECTIONS as HANDOVER_ZONE_SECTIONS
from cellperf.report.hops import SECTIONS as HOP_SECTIONS
from cellperf.report.maps import route_maps
from cellperf.report.min_owd import SECTIONS as MIN_OWD_SECTIONS
from cellperf.report.radio_states import SECTIONS as RADIO_SECTIONS
from cellperf.report.replay import SECTIONS as REPLAY_SECTIONS
from cellperf.report.resegmented import SECTIONS as RESEGMENTED_SECTIONS
from cellperf.report.rtp import SECTIONS as RTP_SECTIONS
from cellperf.report.simulated import seed001_section
from cellperf.report.studies import SECTIONS as STUDY_SECTIONS
from cellperf.report.tcp_options import bdp_table, settings_table
from cellperf.report.throughput_peaks import SECTIONS as PEAK_SECTIONS
from cellperf.report.variants import tcp_variants
from cellperf.report.web import download_times, pages_table

SECTIONS = (("Summary", (summary_table, failed_table)), ("UDP CBR", (udp_throughput,)), ("TCP", (tcp,)),
            ("TCP settings", (bdp_table, settings_table)), ("VoIP", (voip,)), ("Web", (pages_table, download_times)),
            ("Streaming", (stream_stalls,)), *RTP_SECTIONS, ("Remote terminal", (keystroke_latency,)), ("Radio", (channel_table,)),
            ("Simulated TCP (seed 001)", (seed001_section,)), *STUDY_SECTIONS, ("TCP variants", (tcp_variants,)),
            *PEAK_SECTIONS, *RESEGMENTED_SECTIONS, *FRAGMENT_SECTIONS, *SPIKE_SECTIONS, *HANDOVER_MODE_SECTIONS,
            *MIN_OWD_SECTIONS, *HOP_SECTIONS, *RADIO_SECTIONS, ("Maps", (route_maps,)), ("Serving cells", (serving_cells,)),
            *HANDOVER_ZONE_SECTIONS, *FRAME_ERROR_SECTIONS, *REPLAY_SECTIONS)
