# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU settings rules (_gpu_settings): selection, power limit arithmetic, plans and the boot replay."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest


from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_settings as gs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml

XML_DIR = os.path.join(FIXTURES, 'nvidia-smi-xml')


def load(name):
    with open(os.path.join(XML_DIR, name)) as handle:
        return handle.read()


B200 = parse_nvsmi_xml(load('b200-8gpu_k8s-test-infra.xml'), include_supported_clocks=False)
B200_BUS = [g['pci_bus_id'] for g in B200['gpus']]


def lost(nvidia, position):
    """What nvidia-smi prints when one GPU fell off the bus: the block is missing, attached_gpus still counts it."""
    gpus = [g for i, g in enumerate(nvidia['gpus']) if i != position]
    for new_position, gpu in enumerate(gpus):
        gpu = dict(gpu)
        gpu['index'] = new_position
        gpus[new_position] = gpu
    return dict(nvidia, gpus=gpus, gpu_blocks=len(gpus))


@pytest.mark.parametrize('ident, index', [
    ('0', 0), ('7', 7), (7, 7),
    ('GPU-00000003-0000-0000-0000-000000000003', 3),
    ('gpu-00000003-0000-0000-0000-000000000003', 3),
    ('0000:c4:00.0', 4), ('CC:00.0', 7), ('00000000:CC:00.0', 7),
])
def test_select_one(ident, index):
    assert [g['index'] for g in gs.select_gpus(B200, [ident])] == [index]


@pytest.mark.parametrize('wanted', ['all', None, ['all'], ['ALL']])
def test_select_all(wanted):
    assert len(gs.select_gpus(B200, wanted)) == 8


def test_select_keeps_nvidia_smi_order_and_drops_duplicates():
    assert [g['index'] for g in gs.select_gpus(B200, ['CC:00.0', '1', '7'])] == [1, 7]


@pytest.mark.parametrize('wanted, message', [
    (['8'], "gpus: no GPU matches '8' on node1; GPUs present: 0 (00000000:8F:00.0, "),
    (['00000000:01:00.0'], "gpus: no GPU matches '00000000:01:00.0' on node1; GPUs present: "),
    (['bogus'], "gpus: no GPU matches 'bogus' on node1; GPUs present: "),
    # '²'.isdigit() is true in Python, int('²') is not: it must be a message, not a traceback.
    (['\u00b2'], "gpus: no GPU matches '\u00b2' on node1; GPUs present: "),
    ([], 'gpus is empty; give "all" or at least one GPU index, UUID or PCI bus id'),
    (['all', '0'], 'gpus: "all" cannot be combined with other entries, got [\'all\', \'0\']'),
    ('first', "gpus: 'first' is not \"all\" or a list of GPU indexes, UUIDs or PCI bus ids"),
])
def test_select_refuses(wanted, message):
    with pytest.raises(gs.GpuSettingsError) as exc:
        gs.select_gpus(B200, wanted, host='node1')
    assert exc.value.msg.startswith(message)


def test_index_is_refused_when_a_gpu_is_lost():
    # GPU 3 (97:00.0) is lost: nvidia-smi keeps index 4 for C4:00.0, but it is the 4th block printed.
    nvidia = lost(B200, 3)
    with pytest.raises(gs.GpuSettingsError) as exc:
        gs.select_gpus(nvidia, ['4'], host='node1')
    assert exc.value.msg == (
        'gpus: index 4 is ambiguous on node1: nvidia-smi reports 8 attached GPUs but printed 7 (a GPU is lost, and '
        'nvidia-smi keeps the indexes of the others); name the GPUs by PCI bus id instead: '
        '00000000:8F:00.0, 00000000:90:00.0, 00000000:96:00.0, 00000000:C4:00.0, 00000000:C5:00.0, '
        '00000000:CB:00.0, 00000000:CC:00.0')
    # Bus ids and UUIDs still select the right GPU.
    assert [g['pci_bus_id'] for g in gs.select_gpus(nvidia, ['c4:00.0'])] == ['00000000:C4:00.0']
    assert [g['pci_bus_id'] for g in gs.select_gpus(nvidia, ['GPU-00000004-0000-0000-0000-000000000004'])] == [
        '00000000:C4:00.0']
    assert len(gs.select_gpus(nvidia, 'all')) == 7


@pytest.mark.parametrize('value, parsed', [
    (700, ('watts', 700.0)), (700.5, ('watts', 700.5)), ('700', ('watts', 700.0)), ('700W', ('watts', 700.0)),
    (' 700 w ', ('watts', 700.0)), ('70%', ('percent', 70.0)), ('67.5 %', ('percent', 67.5)),
])
def test_parse_power_limit(value, parsed):
    assert gs.parse_power_limit(value) == parsed


@pytest.mark.parametrize('value', ['inf%', 'inf', 'nan', 'NaN%', float('inf'), float('nan'), '1e3', '0', '0%', -5,
                                   '-5%', True, [700], None, 'lots', '', '%', 'W', '\u00b2', '70%%'])
def test_parse_power_limit_refuses(value):
    with pytest.raises(gs.GpuSettingsError) as exc:
        gs.parse_power_limit(value)
    assert exc.value.msg == ('power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. '
                             '"70%"), got {0!r}'.format(value))


def gpu(default=1001.0, low=200.0, high=1100.0, current=1001.0):
    return {'index': 0, 'pci_bus_id': '00000000:8F:00.0', 'uuid': 'GPU-0', 'default_power_limit_w': default,
            'min_power_limit_w': low, 'max_power_limit_w': high, 'power_limit_w': current}


@pytest.mark.parametrize('request_, expected', [
    # The one rounding rule: whole watts, half up. 50% of 1001 W is 500.5 W -> 501 W (the boot script said 500).
    (('percent', 50.0), 501.0),
    (('percent', 67.0), 671.0),   # 670.67
    (('percent', 66.0), 661.0),   # 660.66
    (('percent', 100.0), 1001.0),
    (('watts', 700.0), 700.0),
    (('watts', 700.5), 701.0),
    (('watts', 700.49), 700.0),
])
def test_power_limit_watts_rounding(request_, expected):
    assert gs.power_limit_watts(request_, gpu()) == (expected, None)


def test_power_limit_out_of_range_names_host_gpu_value_and_range():
    with pytest.raises(gs.GpuSettingsError) as exc:
        gs.power_limit_watts(('percent', 10.0), gpu(), host='node1')
    assert exc.value.msg == ('GPU 0 (00000000:8F:00.0) on node1: power_limit 10% of the default 1001.00 W = 100 W is '
                             'outside the allowed range 200.00-1100.00 W')
    assert gs.power_limit_watts(('percent', 10.0), gpu(), clamp=True, host='node1') == (
        200.0, 'GPU 0 (00000000:8F:00.0) on node1: power_limit 10% of the default 1001.00 W = 100 W is outside the '
               'allowed range 200.00-1100.00 W; clamped to 200.00 W')


def test_power_limit_needs_a_default_for_a_percentage():
    with pytest.raises(gs.GpuSettingsError) as exc:
        gs.power_limit_watts(('percent', 70.0), gpu(default=None))
    assert exc.value.msg == ('GPU 0 (00000000:8F:00.0): power_limit 70% needs the default power limit, which '
                             'nvidia-smi reports as N/A')


@pytest.mark.parametrize('current, target, same', [
    (501.0, 501.0, True), (500.6, 501.0, True), (500.5, 501.0, False), (502.0, 501.0, False), (None, 501.0, False),
])
def test_one_tolerance(current, target, same):
    assert gs.power_limit_matches(current, target) is same


def argv(g, *args):
    return ['nvidia-smi', '-i', g['pci_bus_id']] + list(args)


def test_plan_and_boot_replay():
    g = dict(gpu(current=1001.0), persistence_mode=False, max_clocks={'graphics_mhz': 1965, 'mem_mhz': 3996},
             supported_clocks=None)
    wanted = {'persistence_mode': True, 'power_limit': ('percent', 67.0),
              'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}, 'locked_memory_clocks': None}
    plan = gs.plan_gpu(g, wanted, argv, {}, daemon=False)
    assert plan['commands'] == [argv(g, '-pm', '1'), argv(g, '-pl', '671'), argv(g, '-lgc', '1500,1965'),
                                argv(g, '-rmc')]
    # From a fresh boot: no reset is needed; -pm only without the daemon.
    assert gs.boot_commands(g, plan, argv, daemon=False) == [argv(g, '-pm', '1'), argv(g, '-pl', '671'),
                                                             argv(g, '-lgc', '1500,1965')]
    assert gs.boot_commands(g, plan, argv, daemon=True) == [argv(g, '-pl', '671'), argv(g, '-lgc', '1500,1965')]
    replay = gs.boot_replay([(g, plan, gs.boot_commands(g, plan, argv, daemon=True))], '/run/nodeprep/x.json')
    assert replay == {'version': 1, 'record_path': '/run/nodeprep/x.json',
                      'commands': [argv(g, '-pl', '671'), argv(g, '-lgc', '1500,1965')],
                      'locks': {'00000000:8F:00.0': {'uuid': 'GPU-0',
                                                     'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965},
                                                     'locked_memory_clocks': None}}}


def test_plan_reset_unless_known_unlocked():
    g = dict(gpu(), max_clocks={}, supported_clocks=None)
    wanted = {'locked_gpu_clocks': None}
    # Unknown (no record this boot, e.g. the boot unit locked them): reset runs. Current clocks prove nothing.
    assert gs.plan_gpu(g, wanted, argv, {}, daemon=True)['commands'] == [argv(g, '-rgc')]
    assert gs.plan_gpu(g, wanted, argv, {'locked_gpu_clocks': {'min_mhz': 1, 'max_mhz': 2}},
                       daemon=True)['commands'] == [argv(g, '-rgc')]
    assert gs.plan_gpu(g, wanted, argv, {'locked_gpu_clocks': None}, daemon=True)['commands'] == []


def test_nothing_to_replay():
    g = dict(gpu(), persistence_mode=True)
    plan = gs.plan_gpu(g, {'persistence_mode': True, 'power_limit': ('percent', 100.0)}, argv, {}, daemon=True)
    assert plan['commands'] == []
    assert gs.boot_commands(g, plan, argv, daemon=True) == []
    assert gs.boot_replay([(g, plan, [])], '/run/x') is None


LOST = ('GPU 0 (00000000:8F:00.0): {0} would be lost as soon as the last nvidia-smi client exits: persistence mode is '
        '{1} and nvidia-persistenced is not running; enable nvidia-persistenced (the nvidia_driver role does) or set '
        'persistence_mode: true')


@pytest.mark.parametrize('wanted, persistence, daemon, problem', [
    ({'power_limit': ('watts', 700.0)}, False, False, LOST.format('power_limit', 'disabled')),
    ({'power_limit': ('watts', 700.0)}, False, True, None),
    ({'power_limit': ('watts', 700.0)}, True, False, None),
    ({'power_limit': ('watts', 700.0), 'persistence_mode': True}, False, False, None),
    ({'power_limit': ('watts', 700.0), 'persistence_mode': False}, True, False,
     LOST.format('power_limit', 'to be disabled')),
    ({'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}, False, False,
     LOST.format('locked_gpu_clocks', 'disabled')),
    ({'locked_gpu_clocks': None}, False, False, None),
    ({'persistence_mode': False}, True, False, None),
])
def test_volatile_settings_need_persistence(wanted, persistence, daemon, problem):
    g = dict(gpu(), persistence_mode=persistence)
    assert gs.volatile_without_persistence(g, wanted, daemon) == problem


def test_lock_bounds_with_a_malformed_supported_mem_clock():
    g = {'supported_clocks': {'3996': [1965, 1500]}, 'supported_clocks_incomplete': True,
         'max_clocks': {'graphics_mhz': 1965, 'mem_mhz': 3996}}
    assert gs.lock_bounds(g) == {'locked_gpu_clocks': (None, 1965), 'locked_memory_clocks': (None, 3996)}
    g['supported_clocks_incomplete'] = False
    assert gs.lock_bounds(g) == {'locked_gpu_clocks': (1500, 1965), 'locked_memory_clocks': (3996, 3996)}


FORMS = '"all", or a list of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids (00000000:8F:00.0)'


@pytest.mark.parametrize('wanted, problem', [
    ('all', None),
    (['all'], None),
    (['0', '7'], None),
    (['CC:00.0', '0000:8f:00.0', '00000000:90:00.0'], None),
    (['GPU-00000000-0000-4000-8000-000000000001', 'MIG-00000000-0000-4000-8000-000000000001'], None),
    (['ALL'], '"ALL" is not a GPU index, UUID or PCI bus id; expected ' + FORMS),
    (['0', 'GPU0', 'gpu-1'], '"GPU0", "gpu-1" are not a GPU index, UUID or PCI bus id; expected ' + FORMS),
    ([True], 'True is not a GPU index, UUID or PCI bus id; expected ' + FORMS),
    ([], 'expected ' + FORMS),
    ('0', 'expected ' + FORMS),
    (None, 'expected ' + FORMS),
])
def test_selection_problem(wanted, problem):
    assert gs.selection_problem(wanted) == problem


@pytest.mark.parametrize('clocks, reasons, result', [
    ({'graphics_mhz': 1965}, {}, (True, None)),
    ({'graphics_mhz': 1500}, {}, (True, None)),
    ({'graphics_mhz': 1400}, {'sw_power_cap': True, 'gpu_idle': False}, (False, ['sw_power_cap'])),
    ({'graphics_mhz': 120}, {'gpu_idle': True, 'applications_clocks_setting': False}, (False, [])),
    ({'graphics_mhz': None}, {}, (None, None)),
])
def test_lock_holding(clocks, reasons, result):
    gpu = {'clocks': clocks, 'clocks_event_reasons': reasons}
    assert gs.lock_holding(gpu, 'locked_gpu_clocks', {'min_mhz': 1500, 'max_mhz': 1965}) == result


# The role holds no rule of its own: its one nvidia_gpu task hands the module exactly the plan's arguments (the watts
# worked out from a percentage, the GPUs selected, the inputs the plan decided with), templated here as Ansible does.
# -- check mode on a fresh node: the driver's defaults -----------------------------------------------------------------

FRESH = dict(gpu(current=1001.0), persistence_mode=False, max_clocks={'graphics_mhz': 1965, 'mem_mhz': 3996},
             supported_clocks=None, applications_clocks=None, default_applications_clocks=None)


PM_OFF = 'persistence mode is disabled when the driver loads and nvidia-persistenced will not run: -pm 1'
AT_DEFAULT = ': the driver starts at the default limit'


@pytest.mark.parametrize('wanted, daemon, expected', [
    ({}, False, []),
    ({'persistence_mode': True}, True, []),
    ({'persistence_mode': False}, False, []),
    ({'persistence_mode': True}, False, [PM_OFF]),
    ({'persistence_mode': True, 'power_limit': ('percent', 100.0)}, True, []),
    ({'power_limit': ('percent', 72.5)}, True, ['power limit 72.5%' + AT_DEFAULT]),
    ({'power_limit': ('watts', 1001.0)}, True, ['power limit 1001 W' + AT_DEFAULT + ', which is unknown until it loads']),
    ({'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}, True,
     ['locked_gpu_clocks 1500-1965 MHz: the driver starts with the clocks unlocked']),
    ({'locked_memory_clocks': None}, True,
     ['locked_memory_clocks reset: no record of this boot says the clocks are unlocked (-rmc)']),
    ({'applications_clocks': 'reset'}, True, []),
    ({'applications_clocks': {'mem_mhz': 3996, 'graphics_mhz': 1965}}, True,
     ['applications clocks 3996,1965 MHz: the defaults are unknown until the driver loads']),
    ({'persistence_mode': True, 'power_limit': ('percent', 50.0), 'locked_gpu_clocks': None}, False,
     [PM_OFF, 'power limit 50%' + AT_DEFAULT,
      'locked_gpu_clocks reset: no record of this boot says the clocks are unlocked (-rgc)']),
])
def test_fresh_driver_changes(wanted, daemon, expected):
    assert gs.fresh_driver_changes(wanted, daemon) == expected


@pytest.mark.parametrize('wanted', [
    {}, {'persistence_mode': True}, {'persistence_mode': False}, {'power_limit': ('percent', 100.0)},
    {'power_limit': ('percent', 72.5)}, {'power_limit': ('percent', 67.0)}, {'power_limit': ('watts', 700.0)},
    {'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}, {'locked_gpu_clocks': None},
    {'locked_memory_clocks': None}, {'persistence_mode': True, 'power_limit': ('percent', 100.0)},
])
@pytest.mark.parametrize('daemon', [False, True])
def test_fresh_driver_changes_agree_with_the_plan_on_a_fresh_gpu(wanted, daemon):
    # A GPU just loaded: persistence as the daemon leaves it, default power limit, no lock record this boot.
    g = dict(FRESH, persistence_mode=bool(daemon))
    plan = gs.plan_gpu(g, wanted, argv, {}, daemon)
    replay = gs.boot_replay([(g, plan, gs.boot_commands(g, plan, argv, daemon))], '/run/x')
    will_change = bool(plan['commands']) or replay is not None
    assert bool(gs.fresh_driver_changes(wanted, daemon)) == will_change
