# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia-smi of the simulated fleet (test double; see README.md for what it answers)."""
from __future__ import absolute_import, division, print_function

import os
import re
import sys
import time

import gpudouble as gd
import topo_double

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")
BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
DEPRECATED = 'Requested functionality has been deprecated'
EARLY = 'Terminating early due to previous errors.'
RC_OK, RC_INVALID, RC_NOT_SUPPORTED, RC_NO_PERMISSION, RC_NOT_FOUND, RC_NO_DRIVER = 0, 2, 3, 4, 6, 9
RC_MISMATCH = 18
RC_GPU_LOST = 15  # nvidia-smi(1) RETURN VALUE 15: a GPU has fallen off the bus / is inaccessible
PM_WARNING = ('Warning: persistence mode is disabled on device {0}. See the Known Issues section of the '
              'nvidia-smi(1) man page for more information. Run with [--help | -h] switch to get more information '
              'on how to enable persistence mode.')
DEPRECATED_OP = 'The requested functionality has been deprecated.'
NO_CLOCK_PERMISSION = 'The current user does not have permission to change clocks for GPU {0}.'


def branch_of(version):
    return (version or '').split('.', 1)[0]


def cuda_of(version):
    return gd.CUDA_BY_BRANCH.get(branch_of(version), '13.0')


def xml_v12(version):
    """Branches before 580 print the nvsmi_device_v12.dtd layout (570 capture), 580 and later v13."""
    try:
        return int(branch_of(version)) < 580
    except ValueError:
        return False


def legacy_pm_text(version):
    try:
        return int(branch_of(version)) >= 580
    except ValueError:
        return False


def app_clocks_deprecated(version):
    try:
        return int(branch_of(version)) >= 590
    except ValueError:
        return False


# ---------------------------------------------------------------- template

def template_path(profile):
    base = os.environ.get('GPU_DOUBLE_TEMPLATES') or gd.path(os.path.join(gd.LIB_DIR, 'templates'))
    return os.path.join(base, profile['template'])


def load_template(profile):
    """Return (head, [(bus_id, block)], tail) of the profile's XML template with its overrides."""
    with open(template_path(profile)) as f:
        text = f.read()
    parts = re.split(r'(?m)^(?=\t<gpu id=")', text)
    head = parts[0]
    blocks = parts[1:]
    tail = ''
    if blocks:
        last = blocks[-1]
        cut = last.index('\t</gpu>\n') + len('\t</gpu>\n')
        blocks[-1], tail = last[:cut], last[cut:]
    out = []
    for block in blocks:
        for old, new in profile.get('template_overrides', []):
            block = block.replace(old, new)
        bus = re.search(r'<gpu id="([^"]+)">', block).group(1)
        out.append((bus, block))
    return head, out, tail


def _sub_tag(block, tag, value, scope=None):
    """Replace the text of <tag> (inside <scope> if given) in a GPU block."""
    if scope:
        m = re.search(r'(<{0}>)(.*?)(</{0}>)'.format(scope), block, re.S)
        if not m:
            return block
        inner = re.sub(r'(<{0}>)[^<]*(</{0}>)'.format(tag), lambda mm: mm.group(1) + value + mm.group(2),
                       m.group(2), count=1)
        return block[:m.start(2)] + inner + block[m.end(2):]
    return re.sub(r'(<{0}>)[^<]*(</{0}>)'.format(tag), lambda mm: mm.group(1) + value + mm.group(2),
                  block, count=1)


def gpu_view(profile, state, gpu):
    """The values nvidia-smi reports for one GPU (dict used by XML, CSV and the table)."""
    drv = state['driver']
    st = gd.gpu_state(state, profile, gpu['pci_bus_id'])
    dep = app_clocks_deprecated(drv['version'])
    dflt = profile['default_applications_clocks']
    app = st['applications_clocks'] or [dflt['mem_mhz'], dflt['graphics_mhz']]
    idle = profile['idle_clocks']
    gr = idle['graphics_mhz']
    mem = idle['mem_mhz']
    if st['locked_gpu_clocks']:
        gr = st['locked_gpu_clocks'][1]
    if st['locked_mem_clocks']:
        mem = st['locked_mem_clocks'][1]
    cap = gd.clock_cap_mhz(profile)
    capped = cap is not None and gr > cap
    if capped:
        gr = cap  # the lock was accepted, the GPU runs lower (power/thermal slowdown)
    requested = st['power_limit_w']
    pcap = gd.power_cap_w(profile)
    enforced = requested if pcap is None else min(requested, pcap)
    nvswitch = gd.nvswitch_fabric(profile)
    fm = gd.read_text(os.path.join(gd.RUN_DIR, 'fabricmanager.running'))
    if profile.get('fabric') == 'switch-trays':
        # GB200/GB300 compute tray: no local NVSwitch, no fabric manager; the switch trays register the GPUs
        fabric = ('Completed', 'Success')
    elif not nvswitch:
        fabric = ('N/A', 'N/A')
    elif fm is not None and fm.strip() == drv['version']:
        fabric = ('Completed', 'Success')
    else:
        fabric = ('Not Started', 'N/A')
    if fabric[0] != 'N/A' and gpu['pci_bus_id'] in fabric_in_progress(profile):
        fabric = ('In Progress', 'N/A')
    bus = gpu['pci_bus_id']
    slowdown = gd.hw_slowdown(profile).get(bus)
    if slowdown:
        # HW Slowdown cuts the clocks "by a factor of 2 or more" (nvidia-smi --help-query-gpu); the V100 capture of
        # REALITY.md ran at 382 of 1530 MHz: a quarter of the maximum
        gr = min(gr, int(round(profile['max_clocks']['graphics_mhz'] * 0.25)))
    mig = gd.mig_enabled(profile).get(bus, ('Disabled', 'Disabled'))
    return {
        'pci_bus_id': gpu['pci_bus_id'], 'uuid': gpu['uuid'], 'name': profile['product_name'],
        'persistence': st['persistence'], 'power_limit_w': requested, 'enforced_power_limit_w': enforced,
        'clocks_capped': capped,
        'app_clocks': None if dep else {'mem_mhz': app[0], 'graphics_mhz': app[1]},
        'default_app_clocks': None if dep else dflt,
        'graphics_mhz': gr, 'mem_mhz': mem, 'locked': bool(st['locked_gpu_clocks'] or st['locked_mem_clocks']),
        'retired_pending': gpu['pci_bus_id'] in gd.flagged_gpus(profile, gd.FAULT_RETIRED_PAGES),
        'remapped_pending': (gpu['pci_bus_id'] in gd.flagged_gpus(profile, gd.FAULT_REMAPPED_ROWS)
                             or bus in gd.rows_pending(profile)),
        'rows_pending': bus in gd.rows_pending(profile),
        'fabric': fabric,
        'hw_slowdown': slowdown,
        'pcie': gd.pcie_downtrained(profile).get(bus),
        'mig': mig,
    }


def fabric_in_progress(profile):
    """Bus ids of the GPUs the fabric-in-progress fault holds in fabric state In Progress (default: the last GPU)."""
    if not gd.fault_active(gd.FAULT_FABRIC_IN_PROGRESS):
        return set()
    gpus = gd.present_gpus(profile)
    return set(g['pci_bus_id'] for g, _words in gd._fault_gpus(gpus, gd.FAULT_FABRIC_IN_PROGRESS))


def render_xml(profile, state, selected):
    head, blocks, tail = load_template(profile)
    drv = state['driver']
    present = gd.present_gpus(profile)
    head = _sub_tag(head, 'timestamp', time.strftime('%a %b %d %H:%M:%S %Y'))
    head = _sub_tag(head, 'driver_version', drv['version'])
    head = _sub_tag(head, 'cuda_version', cuda_of(drv['version']))
    head = _sub_tag(head, 'attached_gpus', str(len(present)))  # a lost GPU is still attached
    v12 = xml_v12(drv['version'])
    if v12:
        head = head.replace('nvsmi_device_v13.dtd', 'nvsmi_device_v12.dtd')
    by_bus = dict(blocks)
    out = [head]
    for gpu in selected:
        block = by_bus[gpu['pci_bus_id']]
        v = gpu_view(profile, state, gpu)
        block = _sub_tag(block, 'minor_number', str(gpu['index']))
        block = _sub_tag(block, 'persistence_mode', 'Enabled' if v['persistence'] else 'Disabled')
        block = _sub_tag(block, 'gsp_firmware_version', drv['version'])
        block = _sub_tag(block, 'current_power_limit', '{0:.2f} W'.format(v['enforced_power_limit_w']),
                         'gpu_power_readings')
        block = _sub_tag(block, 'requested_power_limit', '{0:.2f} W'.format(v['power_limit_w']),
                         'gpu_power_readings')
        if v['clocks_capped']:
            block = _sub_tag(block, 'clocks_event_reason_sw_power_cap', 'Active')
        block = _sub_tag(block, 'graphics_clock', '{0} MHz'.format(v['graphics_mhz']), 'clocks')
        block = _sub_tag(block, 'sm_clock', '{0} MHz'.format(v['graphics_mhz']), 'clocks')
        block = _sub_tag(block, 'mem_clock', '{0} MHz'.format(v['mem_mhz']), 'clocks')
        if v['locked']:
            block = _sub_tag(block, 'clocks_event_reason_gpu_idle', 'Not Active')
            block = _sub_tag(block, 'clocks_event_reason_applications_clocks_setting', 'Active')
        for scope, val in (('applications_clocks', v['app_clocks']),
                           ('default_applications_clocks', v['default_app_clocks'])):
            g = DEPRECATED if val is None else '{0} MHz'.format(val['graphics_mhz'])
            m = DEPRECATED if val is None else '{0} MHz'.format(val['mem_mhz'])
            block = _sub_tag(block, 'graphics_clock', g, scope)
            block = _sub_tag(block, 'mem_clock', m, scope)
        if v['retired_pending']:
            block = _sub_tag(block, 'pending_blacklist', 'Yes', 'retired_pages')
            block = _sub_tag(block, 'pending_retirement', 'Yes', 'retired_pages')
        if v['remapped_pending']:
            block = _sub_tag(block, 'remapped_row_pending', 'Yes', 'remapped_rows')
        block = fitness_xml(block, v)
        block = _sub_tag(block, 'state', v['fabric'][0], 'fabric')
        block = _sub_tag(block, 'status', v['fabric'][1], 'fabric')
        out.append(to_v12(block) if v12 else block)
    out.append(tail)
    return ''.join(out)


def _tag_value(block, tag, scope=None):
    text = block
    if scope:
        m = re.search(r'<{0}>(.*?)</{0}>'.format(scope), block, re.S)
        text = m.group(1) if m else ''
    m = re.search(r'<{0}>([^<]*)</{0}>'.format(tag), text)
    return m.group(1) if m else None


def fitness_xml(block, v):
    """The XML a fitness fault changes (REALITY.md next to this file, "Fitness faults")."""
    if v['hw_slowdown']:
        block = _sub_tag(block, 'clocks_event_reason_gpu_idle', 'Not Active')
        block = _sub_tag(block, 'clocks_event_reason_hw_slowdown', 'Active')
        reason, counter = (('clocks_event_reason_hw_thermal_slowdown', 'clocks_event_reasons_counters_hw_therm_slowdown')
                           if v['hw_slowdown'] == 'thermal' else
                           ('clocks_event_reason_hw_power_brake_slowdown', 'clocks_event_reasons_counters_hw_power_brake'))
        block = _sub_tag(block, reason, 'Active')
        # the counter of that reason grows while it holds the clocks (v13 only; the v12 layout has no counters)
        block = _sub_tag(block, counter, '{0} us'.format(gd.fault_age_us(gd.FAULT_HW_SLOWDOWN)))
    if v['pcie']:
        width = '{0}x'.format(v['pcie']['width'])
        block = _sub_tag(block, 'current_link_width', width, 'link_widths')
        if v['pcie']['gen']:
            gen = str(v['pcie']['gen'])
            block = _sub_tag(block, 'current_link_gen', gen, 'pcie_gen')
            block = _sub_tag(block, 'device_current_link_gen', gen, 'pcie_gen')
    if v['rows_pending']:
        unc = _tag_value(block, 'remapped_row_unc', 'remapped_rows')
        if unc is not None and unc.isdigit():
            block = _sub_tag(block, 'remapped_row_unc', str(int(unc) + 1), 'remapped_rows')
    if v['mig'] != ('Disabled', 'Disabled'):
        block = _sub_tag(block, 'current_mig', v['mig'][0], 'mig_mode')
        block = _sub_tag(block, 'pending_mig', v['mig'][1], 'mig_mode')
    return block


def _drop(block, tag):
    """Remove one element (with its children and its line) from a GPU block."""
    return re.sub(r'(?s)\n[ \t]*<{0}>.*?</{0}>'.format(tag), '', block, count=1)


def to_v12(block):
    """A v13 GPU block in the nvsmi_device_v12.dtd layout of the 570 capture (a100-sxm4-40gb-1gpu_k8s-test-infra):
    no display_attached, pdi, clocks_event_reasons_counters, channel/tpc_repair_pending, fabric health
    summary/incorrect_configuration; absolute temperature thresholds instead of the tlimit ones; gpu_reset_status
    before gpu_recovery_action and voltage after clock_policy.  Values that only the 570 capture shows are copied
    from it (reset status deprecated, voltage N/A); the absolute thresholds of H100/B200 are not in any capture
    (N/A, a guess)."""
    for tag in ('display_attached', 'pdi', 'clocks_event_reasons_counters', 'channel_repair_pending',
                'tpc_repair_pending', 'summary', 'incorrect_configuration'):
        block = _drop(block, tag)
    for v13, v12 in (('gpu_temp_max_tlimit_threshold', 'gpu_temp_max_threshold'),
                     ('gpu_temp_slow_tlimit_threshold', 'gpu_temp_slow_threshold'),
                     ('gpu_temp_max_gpu_tlimit_threshold', 'gpu_temp_max_gpu_threshold'),
                     ('gpu_temp_max_mem_tlimit_threshold', 'gpu_temp_max_mem_threshold')):
        block = re.sub(r'<{0}>[^<]*</{0}>'.format(v13), '<{0}>N/A</{0}>'.format(v12), block)
    dep = 'Requested functionality has been deprecated'
    block = re.sub(r'(?m)^([ \t]*)<gpu_recovery_action>',
                   lambda m: ('{0}<gpu_reset_status>\n{0}\t<reset_required>{1}</reset_required>\n'
                              '{0}\t<drain_and_reset_recommended>{1}</drain_and_reset_recommended>\n'
                              '{0}</gpu_reset_status>\n{0}<gpu_recovery_action>').format(m.group(1), dep),
                   block, count=1)
    block = re.sub(r'(?m)^([ \t]*)</clock_policy>\n',
                   lambda m: '{0}</clock_policy>\n{0}<voltage>\n{0}\t<graphics_volt>N/A</graphics_volt>\n'
                             '{0}</voltage>\n'.format(m.group(1)), block, count=1)
    return block


# ---------------------------------------------------------------- CSV

def _w(x):
    return '{0:.2f} W'.format(x)


def _mhz(x):
    return '{0} MHz'.format(x)


def _active(flag):
    return 'Active' if flag else 'Not Active'


def _pcie(profile, v):
    """(generation, width) the link runs at now: the profile's, or what the pcie-downtrained fault left."""
    gen, width = profile['pcie']['gen_max'], profile['pcie']['width_max']
    if v['pcie']:
        width = v['pcie']['width']
        gen = v['pcie']['gen'] or gen
    return gen, width


def _dep_or(val, key):
    return DEPRECATED if val is None else _mhz(val[key])


# canonical name -> (unit or None, getter(profile, state, index, gpu, view))
FIELDS = {
    'timestamp': (None, lambda p, s, i, g, v: time.strftime('%Y/%m/%d %H:%M:%S.000')),
    'driver_version': (None, lambda p, s, i, g, v: s['driver']['version']),
    'count': (None, lambda p, s, i, g, v: str(len(gd.present_gpus(p)))),
    'name': (None, lambda p, s, i, g, v: p['product_name']),
    'uuid': (None, lambda p, s, i, g, v: g['uuid']),
    'pci.bus_id': (None, lambda p, s, i, g, v: g['pci_bus_id']),
    'pci.device_id': (None, lambda p, s, i, g, v: '0x{0}10DE'.format(p['pci_device_id'][2:].upper())),
    'pci.sub_device_id': (None, lambda p, s, i, g, v: p['pci_sub_system_id']),
    'index': (None, lambda p, s, i, g, v: str(i)),
    'persistence_mode': (None, lambda p, s, i, g, v: 'Enabled' if v['persistence'] else 'Disabled'),
    'pstate': (None, lambda p, s, i, g, v: 'P0'),
    'memory.total': ('MiB', lambda p, s, i, g, v: '{0} MiB'.format(p['memory_total_mib'])),
    'compute_mode': (None, lambda p, s, i, g, v: 'Default'),
    'mig.mode.current': (None, lambda p, s, i, g, v: v['mig'][0]),
    'mig.mode.pending': (None, lambda p, s, i, g, v: v['mig'][1]),
    'pcie.link.gen.current': (None, lambda p, s, i, g, v: str(_pcie(p, v)[0])),
    'pcie.link.gen.max': (None, lambda p, s, i, g, v: str(p['pcie']['gen_max'])),
    'pcie.link.width.current': (None, lambda p, s, i, g, v: str(_pcie(p, v)[1])),
    'pcie.link.width.max': (None, lambda p, s, i, g, v: str(p['pcie']['width_max'])),
    'clocks_event_reasons.hw_slowdown': (None, lambda p, s, i, g, v: _active(v['hw_slowdown'])),
    'clocks_event_reasons.hw_thermal_slowdown': (None, lambda p, s, i, g, v: _active(v['hw_slowdown'] == 'thermal')),
    'clocks_event_reasons.hw_power_brake_slowdown': (
        None, lambda p, s, i, g, v: _active(v['hw_slowdown'] == 'power-brake')),
    'remapped_rows.failure': (None, lambda p, s, i, g, v: 'No'),
    'ecc.mode.current': (None, lambda p, s, i, g, v: 'Enabled'),
    'power.limit': ('W', lambda p, s, i, g, v: _w(v['power_limit_w'])),
    'enforced.power.limit': ('W', lambda p, s, i, g, v: _w(v['enforced_power_limit_w'])),
    'power.default_limit': ('W', lambda p, s, i, g, v: _w(p['power']['default_w'])),
    'power.min_limit': ('W', lambda p, s, i, g, v: _w(p['power']['min_w'])),
    'power.max_limit': ('W', lambda p, s, i, g, v: _w(p['power']['max_w'])),
    'clocks.current.graphics': ('MHz', lambda p, s, i, g, v: _mhz(v['graphics_mhz'])),
    'clocks.current.sm': ('MHz', lambda p, s, i, g, v: _mhz(v['graphics_mhz'])),
    'clocks.current.memory': ('MHz', lambda p, s, i, g, v: _mhz(v['mem_mhz'])),
    'clocks.applications.graphics': ('MHz', lambda p, s, i, g, v: _dep_or(v['app_clocks'], 'graphics_mhz')),
    'clocks.applications.memory': ('MHz', lambda p, s, i, g, v: _dep_or(v['app_clocks'], 'mem_mhz')),
    'clocks.default_applications.graphics': (
        'MHz', lambda p, s, i, g, v: _dep_or(v['default_app_clocks'], 'graphics_mhz')),
    'clocks.default_applications.memory': (
        'MHz', lambda p, s, i, g, v: _dep_or(v['default_app_clocks'], 'mem_mhz')),
    'clocks.max.graphics': ('MHz', lambda p, s, i, g, v: _mhz(p['max_clocks']['graphics_mhz'])),
    'clocks.max.sm': ('MHz', lambda p, s, i, g, v: _mhz(p['max_clocks']['sm_mhz'])),
    'clocks.max.memory': ('MHz', lambda p, s, i, g, v: _mhz(p['max_clocks']['mem_mhz'])),
    'retired_pages.pending': (None, lambda p, s, i, g, v: 'Yes' if v['retired_pending'] else 'N/A'),
    'remapped_rows.pending': (None, lambda p, s, i, g, v: 'Yes' if v['remapped_pending'] else 'No'),
    'fabric.state': (None, lambda p, s, i, g, v: v['fabric'][0]),
    'fabric.status': (None, lambda p, s, i, g, v: v['fabric'][1]),
}
ALIASES = {
    'gpu_name': 'name', 'gpu_uuid': 'uuid', 'gpu_bus_id': 'pci.bus_id',
    'clocks.gr': 'clocks.current.graphics', 'clocks.graphics': 'clocks.current.graphics',
    'clocks.sm': 'clocks.current.sm', 'clocks.mem': 'clocks.current.memory',
    'clocks.memory': 'clocks.current.memory',
    'clocks.applications.gr': 'clocks.applications.graphics',
    'clocks.applications.mem': 'clocks.applications.memory',
    'clocks.default_applications.gr': 'clocks.default_applications.graphics',
    'clocks.default_applications.mem': 'clocks.default_applications.memory',
    'clocks.max.gr': 'clocks.max.graphics', 'clocks.max.mem': 'clocks.max.memory',
    'power.management.limit': 'power.limit',
}


def render_csv(profile, state, selected, fields, fmt):
    opts = [o.strip() for o in fmt.split(',')]
    if not opts or opts[0] != 'csv' or any(o not in ('csv', 'noheader', 'nounits') for o in opts):
        return None, BAD_ARGS, RC_INVALID
    names = []
    for raw in fields.split(','):
        raw = raw.strip()
        canon = ALIASES.get(raw.lower(), raw.lower())
        if canon not in FIELDS:
            return None, 'Field "{0}" is not a valid field to query.'.format(raw), RC_INVALID
        names.append(canon)
    lines = []
    if 'noheader' not in opts:
        heads = []
        for n in names:
            unit = FIELDS[n][0]
            heads.append(n if (unit is None or 'nounits' in opts) else '{0} [{1}]'.format(n, unit))
        lines.append(', '.join(heads))
    for gpu in selected:
        idx = gpu['index']
        v = gpu_view(profile, state, gpu)
        vals = []
        for n in names:
            val = FIELDS[n][1](profile, state, idx, gpu, v)
            if val in (DEPRECATED, 'N/A'):
                val = '[{0}]'.format(val)
            elif 'nounits' in opts and FIELDS[n][0]:
                val = val[:-len(FIELDS[n][0]) - 1]
            vals.append(val)
        lines.append(', '.join(vals))
    return '\n'.join(lines) + '\n', None, RC_OK


def render_table(profile, state, selected):
    drv = state['driver']
    out = [time.strftime('%a %b %d %H:%M:%S %Y') + '       ',
           '+' + '-' * 89 + '+',
           '| NVIDIA-SMI {0:<23}Driver Version: {0:<15}CUDA Version: {1:<9}|'.format(
               drv['version'], cuda_of(drv['version'])),
           '+' + '-' * 41 + '+' + '-' * 24 + '+' + '-' * 22 + '+',
           '| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |',
           '| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |',
           '|                                         |                        |               MIG M. |',
           '|' + '=' * 41 + '+' + '=' * 24 + '+' + '=' * 22 + '|']
    for gpu in selected:
        v = gpu_view(profile, state, gpu)
        out.append('| {0:>3}  {1:<29}{2:>4}  |   {3} Off | {4:>20} |'.format(
            gpu['index'], profile['product_name'][:28], 'On' if v['persistence'] else 'Off',
            gpu['pci_bus_id'], '0'))
        usage = '{0:>4}W / {1:>4}W'.format(0, int(v['enforced_power_limit_w']))
        mem = '0MiB / {0}MiB'.format(profile['memory_total_mib'])
        out.append('| N/A   30C    P0          {0:>14} | {1:>22} | {2:>7}      Default |'.format(usage, mem, '0%'))
        out.append('|                                         |                        |             Disabled |')
        out.append('+' + '-' * 41 + '+' + '-' * 24 + '+' + '-' * 22 + '+')
    out += ['', '+' + '-' * 89 + '+',
            '| Processes:' + ' ' * 79 + '|',
            '|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |',
            '|        ID   ID                                                               Usage      |',
            '|' + '=' * 89 + '|',
            '|  No running processes found' + ' ' * 61 + '|',
            '+' + '-' * 89 + '+']
    return '\n'.join(out) + '\n'


# ---------------------------------------------------------------- setters

def supported_clocks(profile):
    return dict((int(k), [int(x) for x in v]) for k, v in profile['supported_clocks'].items())


def _int_pair(text):
    parts = [p.strip() for p in text.split(',')]
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or not all(re.match(r'^\d+$', p) for p in parts):
        return None
    return [int(parts[0]), int(parts[1])]


# ---------------------------------------------------------------- nvlink

NVLINK_OPTIONS = {'-s': 'status', '--status': 'status', '-e': 'errors', '--errorcounters': 'errors'}


def parse_nvlink_args(argv):
    """``nvidia-smi nvlink`` options the double answers: -s/--status, -e/--errorcounters, -i/--id; None otherwise."""
    out = {'mode': None, 'id': None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in NVLINK_OPTIONS and out['mode'] is None:
            out['mode'] = NVLINK_OPTIONS[arg]
        elif arg in ('-i', '--id') and i + 1 < len(argv):
            out['id'] = argv[i + 1]
            i += 1
        elif arg.startswith('--id='):
            out['id'] = arg.split('=', 1)[1]
        else:
            return None
        i += 1
    return out if out['mode'] else None


def all_inactive_text(version):
    """NVML's line for a GPU whose links are all down: ``inactive`` in the Azure capture (A100 SXM4),
    ``inActive`` on 555.42.02 (HPE capture); the fleet's branches (570 and later) print the later wording (guess)."""
    try:
        later = int(branch_of(version)) >= 555
    except ValueError:
        later = True
    return 'NVML: Unable to retrieve NVLink information as all links are {0}'.format(
        'inActive' if later else 'inactive')


def render_nvlink(profile, selected, mode, version):
    """``nvidia-smi nvlink -s`` / ``-e`` in the layout of the captures (tests/fixtures/nvlink): a header per GPU,
    ``<TAB> Link n: ...`` lines; -e prints Replay, Recovery and CRC errors per link, links apart by an empty line."""
    total = int(profile.get('nvlinks') or 0)
    speed = '{0:g}'.format(profile.get('nvlink_gbps') or 0)
    down = gd.nvlink_inactive(profile)
    out = []
    for gpu in selected:
        out.append('GPU {0}: {1} (UUID: {2})'.format(gpu['index'], profile['product_name'], gpu['uuid']))
        inactive = down.get(gpu['pci_bus_id'], set())
        if mode == 'status':
            if total and len(inactive) >= total:
                out.append(all_inactive_text(version))
                continue
            for link in range(total):
                out.append('\t Link {0}: {1}'.format(link, '<inactive>' if link in inactive else speed + ' GB/s'))
        else:
            for link in range(total):
                if link:
                    out.append('')
                for counter in ('Replay Errors', 'Recovery Errors', 'CRC Errors'):
                    out.append('\t Link {0}: {1}: 0'.format(link, counter))
    return ''.join(line + '\n' for line in out)


def persistenced_running():
    pid = gd.persistenced_pid()
    if pid is None:
        return False
    if gd.root() != '/':
        return True
    return os.path.exists('/proc/{0}'.format(pid))


def op_persistence(profile, state, gpu, value, out):
    bus = gpu['pci_bus_id']
    if value not in ('0', '1', 'ENABLED', 'DISABLED', 'enabled', 'disabled'):
        return BAD_ARGS, RC_INVALID
    on = value in ('1', 'ENABLED', 'enabled')
    word = 'Enabled' if on else 'Disabled'
    st = gd.gpu_state(state, profile, bus)
    if st['persistence'] == on:
        out.append('Persistence mode is already {0} for GPU {1}.'.format(word, bus))
        return None, RC_OK
    if gd.euid() != 0:
        return 'Unable to set persistence mode for GPU {0}: Insufficient Permissions'.format(bus), \
            RC_NO_PERMISSION
    st['persistence'] = on
    # 580+: without nvidia-persistenced the driver's own ("legacy") persistence mode is used.
    legacy = legacy_pm_text(state['driver']['version']) and not persistenced_running()
    out.append('{0} {1}persistence mode for GPU {2}.'.format(word, 'Legacy ' if legacy else '', bus))
    return None, RC_OK


def op_power_limit(profile, state, gpu, value, out):
    bus = gpu['pci_bus_id']
    try:
        watts = float(value)
    except ValueError:
        return BAD_ARGS, RC_INVALID
    if 'power-limit' in profile.get('unsupported', []):
        out.append('Changing power management limit is not supported in current scope for GPU: {0}.'.format(bus))
        return None, RC_OK
    if gd.euid() != 0:
        return 'Failed to set power management limit for GPU {0}: Insufficient Permissions'.format(bus), \
            RC_NO_PERMISSION
    pw = profile['power']
    if watts < pw['min_w'] or watts > pw['max_w']:
        return ('Provided power limit {0:.2f} W is not a valid power limit which should be between '
                '{1:.2f} W and {2:.2f} W for GPU {3}'.format(watts, pw['min_w'], pw['max_w'], bus)), RC_INVALID
    st = gd.gpu_state(state, profile, bus)
    old = st['power_limit_w']
    st['power_limit_w'] = watts
    out.append('Power limit for GPU {0} was set to {1:.2f} W from {2:.2f} W.'.format(bus, watts, old))
    return None, RC_OK


def _clock_op(profile, state, gpu, value, out, kind):
    bus = gpu['pci_bus_id']
    pair = _int_pair(value)
    if pair is None or pair[0] > pair[1]:
        return BAD_ARGS, RC_INVALID
    sup = supported_clocks(profile)
    if kind == 'gpu':
        allowed = sorted(set(x for v in sup.values() for x in v))
        label, key, fmt = 'GPU', 'locked_gpu_clocks', 'GPU clocks set to "(gpuClkMin {0}, gpuClkMax {1})" for GPU {2}'
    else:
        allowed = sorted(sup)
        label, key, fmt = 'memory', 'locked_mem_clocks', \
            'Memory clocks set to "(memClkMin {0}, memClkMax {1})" for GPU {2}'
    if 'lock-{0}-clocks'.format(kind) in profile.get('unsupported', []):
        out.append('Setting locked {0} clocks is not supported for GPU {1}.'.format(label, bus))
        out.append('Treating as warning and moving on.')
        return None, RC_OK
    if gd.euid() != 0:
        return NO_CLOCK_PERMISSION.format(bus), RC_NO_PERMISSION
    if pair[0] < allowed[0] or pair[1] > allowed[-1]:
        return ('Failed to set locked {0} clocks for GPU {1}: Invalid Argument (supported range {2} MHz to '
                '{3} MHz)'.format(label, bus, allowed[0], allowed[-1])), RC_INVALID
    st = gd.gpu_state(state, profile, bus)
    st[key] = pair
    out.append(fmt.format(pair[0], pair[1], bus))
    if not st['persistence']:
        out.extend(['', PM_WARNING.format(bus)])
    return None, RC_OK


def op_lgc(profile, state, gpu, value, out):
    return _clock_op(profile, state, gpu, value, out, 'gpu')


def op_lmc(profile, state, gpu, value, out):
    return _clock_op(profile, state, gpu, value, out, 'memory')


def _reset_op(profile, state, gpu, out, key):
    """-rgc / -rmc print nothing per GPU (only the closing "All done.")."""
    bus = gpu['pci_bus_id']
    if gd.euid() != 0:
        return NO_CLOCK_PERMISSION.format(bus), RC_NO_PERMISSION
    gd.gpu_state(state, profile, bus)[key] = None
    return None, RC_OK


def op_rgc(profile, state, gpu, value, out):
    return _reset_op(profile, state, gpu, out, 'locked_gpu_clocks')


def op_rmc(profile, state, gpu, value, out):
    return _reset_op(profile, state, gpu, out, 'locked_mem_clocks')


def op_ac(profile, state, gpu, value, out):
    bus = gpu['pci_bus_id']
    pair = _int_pair(value)
    if pair is None or ',' not in value:
        return BAD_ARGS, RC_INVALID
    if app_clocks_deprecated(state['driver']['version']):
        if DEPRECATED_OP not in out:
            out.append(DEPRECATED_OP)
        return None, RC_OK
    if gd.euid() != 0:
        return 'Setting applications clocks is not supported for GPU {0}: Insufficient Permissions'.format(bus), \
            RC_NO_PERMISSION
    mem, gr = pair
    if gr not in supported_clocks(profile).get(mem, []):
        out.append('Specified clock combination "(MEM {0}, SM {1})" is not supported for GPU {2}. Run '
                   "'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations".format(
                       mem, gr, bus))
        out.append('Treating as warning and moving on.')
        return None, RC_OK
    gd.gpu_state(state, profile, bus)['applications_clocks'] = [mem, gr]
    out.append('Applications clocks set to "(MEM {0}, SM {1})" for GPU {2}'.format(mem, gr, bus))
    return None, RC_OK


def op_rac(profile, state, gpu, value, out):
    bus = gpu['pci_bus_id']
    if app_clocks_deprecated(state['driver']['version']):
        if DEPRECATED_OP not in out:
            out.append(DEPRECATED_OP)
        return None, RC_OK
    if gd.euid() != 0:
        return 'Failed to reset applications clocks for GPU {0}: Insufficient Permissions'.format(bus), \
            RC_NO_PERMISSION
    gd.gpu_state(state, profile, bus)['applications_clocks'] = None
    return None, RC_OK


# option -> (canonical, takes value)
OPTIONS = {
    '-i': ('id', True), '--id': ('id', True),
    '-q': ('query', False), '--query': ('query', False),
    '-x': ('xml', False), '--xml-format': ('xml', False),
    '-d': ('display', True), '--display': ('display', True),
    '-L': ('list', False), '--list-gpus': ('list', False),
    '--query-gpu': ('query-gpu', True), '--format': ('format', True),
    '-pm': ('pm', True), '--persistence-mode': ('pm', True),
    '-pl': ('pl', True), '--power-limit': ('pl', True),
    '-lgc': ('lgc', True), '--lock-gpu-clocks': ('lgc', True),
    '-rgc': ('rgc', False), '--reset-gpu-clocks': ('rgc', False),
    '-lmc': ('lmc', True), '--lock-memory-clocks': ('lmc', True),
    '-rmc': ('rmc', False), '--reset-memory-clocks': ('rmc', False),
    '-ac': ('ac', True), '--applications-clocks': ('ac', True),
    '-rac': ('rac', False), '--reset-applications-clocks': ('rac', False),
    '--version': ('version', False),
}
SETTERS = {'pm': op_persistence, 'pl': op_power_limit, 'lgc': op_lgc, 'lmc': op_lmc, 'rgc': op_rgc,
           'rmc': op_rmc, 'ac': op_ac, 'rac': op_rac}


def parse_args(argv):
    opts = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, val = arg, None
        if arg.startswith('--') and '=' in arg:
            name, val = arg.split('=', 1)
        if name not in OPTIONS:
            return None
        canon, takes = OPTIONS[name]
        if takes and val is None:
            i += 1
            if i >= len(argv):
                return None
            val = argv[i]
        opts.append((canon, val))
        i += 1
    return opts


def select(profile, ident):
    """GPUs named by -i (all present GPUs without it); None when an id matches nothing."""
    present = gd.present_gpus(profile)
    if ident is None:
        return present
    chosen = []
    for part in ident.split(','):
        part = part.strip()
        hit = None
        for gpu in present:
            if part == str(gpu['index']) or part.lower() == gpu['uuid'].lower() \
                    or gd.normalize_bus_id(part) == gpu['pci_bus_id']:
                hit = gpu
        if hit is None:
            return None
        chosen.append(hit)
    return chosen


def handle_error(gpu, reason):
    """What nvidia-smi prints for a GPU whose NVML handle it cannot get (R16 captures)."""
    return 'Unable to determine the device handle for gpu {0}: {1}'.format(gd.sysfs_bus_id(gpu['pci_bus_id']), reason)


def log_call(argv):
    """One line per nvidia-smi call in /run/gpu-double/calls.log (benchmarks count calls per node)."""
    try:
        target = gd.path(os.path.join(gd.RUN_DIR, 'calls.log'))
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        with open(target, 'a') as f:
            f.write('{0:.3f} {1}\n'.format(time.time(), ' '.join(argv)))
    except (IOError, OSError):
        pass


def invoke(argv, userspace_version):
    """Return (stdout text, stderr text, rc)."""
    log_call(argv)
    if gd.fault_active(gd.FAULT_SMI_HANG):
        while True:
            time.sleep(3600)
    topo = argv[:1] == ['topo']
    if topo and argv[1:] != ['-m']:
        return 'The GPU double answers topo only with -m (see tests/testbed/gpu_double/README.md)\n', '', RC_INVALID
    nvlink = None
    if argv[:1] == ['nvlink']:
        nvlink = parse_nvlink_args(argv[1:])
        if nvlink is None:
            return BAD_ARGS + '\n', '', RC_INVALID
    opts = [] if topo or nvlink else parse_args(argv)
    if opts is None:
        return BAD_ARGS + '\n', '', RC_INVALID
    od = dict(opts)
    if nvlink:
        od = {'id': nvlink.get('id')}
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    drv = state['driver']
    if 'version' in od:
        return ('NVIDIA-SMI version  : {0}\nNVML version        : {1}\nDRIVER version      : {2}\n'
                'CUDA Version        : {3}\n'.format(userspace_version, userspace_version.rsplit('.', 1)[0],
                                                     drv.get('version') or 'N/A',
                                                     cuda_of(userspace_version))), '', RC_OK
    if not drv.get('loaded'):
        return NO_DRIVER + '\n', '', RC_NO_DRIVER
    if drv['version'] != userspace_version:
        return ('Failed to initialize NVML: Driver/library version mismatch\nNVML library version: {0}\n'.format(
            userspace_version.rsplit('.', 1)[0])), '', RC_MISMATCH
    if not drv.get('gpus_initialized') or not gd.present_gpus(profile):
        return 'No devices were found\n', '', RC_NOT_FOUND
    if topo:
        return topo_double.render_topo(profile), '', RC_OK
    selected = select(profile, od.get('id'))
    if selected is None:
        return 'No devices were found\n', '', RC_NOT_FOUND
    lost = gd.lost_gpus(profile)
    errors = [handle_error(g, lost[g['pci_bus_id']]) for g in selected if g['pci_bus_id'] in lost]
    selected = [g for g in selected if g['pci_bus_id'] not in lost]
    err_text = ''.join(e + '\n' for e in errors)
    rc_lost = RC_GPU_LOST if errors else RC_OK
    if nvlink:
        out = render_nvlink(profile, selected, nvlink['mode'], state['driver']['version'])
        if gd.reset_volatile(state, profile):
            gd.save_state(state)
        return out, err_text, rc_lost
    try:
        out, rc = _answer(profile, state, opts, od, selected)
    finally:
        # the invocation was the driver's last client: GPUs without persistence mode lose their settings
        if gd.reset_volatile(state, profile):
            gd.save_state(state)
    if rc == RC_OK:
        rc = rc_lost
    return out, err_text, rc


def _answer(profile, state, opts, od, selected):
    setters = [(k, v) for k, v in opts if k in SETTERS]
    if setters:
        lines = []
        for key, val in setters:
            for gpu in selected:
                err, rc = SETTERS[key](profile, state, gpu, val, lines)
                if err:
                    gd.save_state(state)
                    return '\n'.join(lines + [err, EARLY]) + '\n', rc
        gd.save_state(state)
        if lines == [DEPRECATED_OP]:
            return DEPRECATED_OP + '\n', RC_OK
        return '\n'.join(lines + ['All done.']) + '\n', RC_OK
    if 'query-gpu' in od:
        if 'format' not in od:
            return BAD_ARGS + '\n', RC_INVALID
        text, err, rc = render_csv(profile, state, selected, od['query-gpu'], od['format'])
        return (text if err is None else err + '\n'), rc
    if 'list' in od:
        return ''.join('GPU {0}: {1} (UUID: {2})\n'.format(g['index'], profile['product_name'], g['uuid'])
                       for g in selected), RC_OK
    if 'query' in od and 'xml' in od:
        return render_xml(profile, state, selected), RC_OK
    if 'query' in od:
        return 'The GPU double prints -q only with -x (XML); see tests/testbed/gpu_double/README.md\n', \
            RC_INVALID
    if not opts or list(od) == ['id']:
        return render_table(profile, state, selected), RC_OK
    return BAD_ARGS + '\n', RC_INVALID


def run(argv, userspace_version):
    """Return (stdout text, rc) (stderr dropped; see invoke)."""
    out, _err, rc = invoke(argv, userspace_version)
    return out, rc


def main(argv, userspace_version):
    try:
        text, err, rc = invoke(argv, userspace_version)
    except gd.DoubleError as exc:
        sys.stderr.write('gpu-double: {0}\n'.format(exc))
        return 255
    try:
        sys.stderr.write(err)
        sys.stderr.flush()
        sys.stdout.write(text)
        sys.stdout.flush()
    except IOError:  # reader went away (nvidia-smi ... | head)
        pass
    return rc
