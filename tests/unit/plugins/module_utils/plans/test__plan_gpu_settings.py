# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_settings plan: a table of facts + settings -> plan, agreement with the readiness checks, idempotence.

The settings here are what node_plan hands a plan (typed: see
tests/unit/plugins/plugin_utils/test__plans_gpu_settings.py for the typing of "false", "ALL" and the like); the
node state is built from the B200 capture of nvidia-smi -q -x.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import agreement
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, ROOT

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_settings as gs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_gpu_settings as pg
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml

with open(os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')) as _handle:
    B200 = parse_nvsmi_xml(_handle.read())
B200.update(present=True, error=None, partial=False, nvidia_smi='/usr/bin/nvidia-smi')
# The fixture's GPUs all print the same UUID; give each its own, as real GPUs have.
for _n, _gpu in enumerate(B200['gpus']):
    _gpu['uuid'] = 'GPU-{0:08d}-0000-4000-8000-000000000000'.format(_n)
    _gpu['clocks'] = {'graphics_mhz': 120, 'sm_mhz': 120, 'mem_mhz': 7680, 'video_mhz': 600}
    _gpu['clocks_event_reasons'] = {'gpu_idle': True, 'sw_power_cap': False, 'applications_clocks_setting': False}

with open(os.path.join(ROOT, 'roles', 'gpu_settings', 'files', 'nodeprep-gpu-settings')) as _handle:
    SCRIPT = _handle.read()

BOOT = '4a1d2c3b-0000-4000-8000-000000000001'
CONFIG = '/etc/nodeprep/gpu-settings.replay'
ALL = 'GPUs 0, 1, 2, 3, 4, 5, 6, 7'
SETTLED_FILES = [CONFIG, '/etc/nodeprep', pg.SCRIPT, pg.UNIT_PATH, pg.UNIT_LINK]


def settings(**given):
    out = dict((name, copy.deepcopy(spec['default'])) for name, spec in pg.SETTINGS.items())
    out['nodeprep_gpu_settings_gpus'] = ['all']          # what the validator makes of the default "all"
    out.update(('nodeprep_gpu_settings_' + key, value) for key, value in given.items())
    return out


def context(**given):
    ctx = _plan.new_context(host='node1', **given)
    ctx['role_files'] = {'script': SCRIPT}
    return ctx


def node(nvidia=None, daemon=True, files=None, record=None):
    """A node's gathered facts: nothing of the role installed yet (files: path -> entry)."""
    state = {'exists': False}
    facts = {
        # The PCI scan of the kernel subset: the GPU rule (rules/_gpu_node.py) reads it, gpu_settings being a GPU role.
        'nodeprep_gathered': ['nvidia', 'kernel'],
        'kernel_state': {'pci': {'gpu_count': 8}},
        'nvidia': copy.deepcopy(B200 if nvidia is None else nvidia),
        'nodeprep_units': {pg.PERSISTENCED: {'active': 'active' if daemon else 'inactive'},
                           pg.UNIT: {'active': 'inactive'}},
        'nodeprep_files': dict((path, dict(state)) for path in [pg.PLATFORM_PYTHON] + SETTLED_FILES),
        'nodeprep_contents': {pg.RECORD: record, pg.BOOT_ID: BOOT + '\n'},
    }
    facts['nodeprep_files'].update(files or {})
    return facts


def gpu_module(facts, args):
    """What nvidia_gpu does with the plan's arguments (its own functions, called as the module calls them)."""
    wanted = gs.parse_settings(args)
    record, boot = pg._record(facts)
    nvidia = facts['nvidia']

    def argv(gpu, *rest):
        return [args['nvidia_smi'], '-i', gpu['pci_bus_id']] + list(rest)

    decided = gs.plan_settings(nvidia, wanted, args['gpus'], lambda gpu: gs.known_locks(record, boot, gpu),
                               args['persistenced'], argv, args['power_limit_clamp'], args['host_label'],
                               args['skip_unsupported_applications_clocks'],
                               os.path.join(args['state_dir'], gs.LOCK_RECORD) if args['replay_file'] else None)
    return decided


def settle(facts, plan_, cap_w=None, cap_mhz=None, touch_gpus=True):
    """Apply the plan's files and nvidia_gpu arguments to the fake node (the GPUs take the values unless
    ``touch_gpus`` is false; an out-of-band cap keeps the enforced limit or the clock lower); returns the new facts."""
    facts = copy.deepcopy(facts)
    for entry in plan_['files']:
        new = {'exists': True, 'type': entry['state'], 'uid': 0, 'gid': 0}
        if entry['state'] == 'file':
            new.update(sha1=_plan.sha1_text(entry['content']), mode=entry['mode'])
        elif entry['state'] == 'directory':
            new['mode'] = entry['mode']
        else:
            new['target'] = entry['src']
        facts['nodeprep_files'][entry['path']] = new
    args = plan_['args'].get('nvidia_gpu')
    if args:
        decided = gpu_module(facts, args)
        record, boot = pg._record(facts)
        gpus = dict(((record or {}).get('gpus') or {}))
        for gpu, result in zip(decided['selected'], decided['plans']):
            if not args['apply']:
                break
            live = gs.find_by_bus_id(facts['nvidia']['gpus'], gpu['pci_bus_id'])
            after = result['after']
            if not touch_gpus:
                live = copy.deepcopy(live)
            if 'power_limit_w' in after:
                live['power_limit_w'] = after['power_limit_w']
                live['enforced_power_limit_w'] = after['power_limit_w'] if cap_w is None else min(
                    cap_w, after['power_limit_w'])
            if 'persistence_mode' in after:
                live['persistence_mode'] = after['persistence_mode']
            entry = {'uuid': gpu['uuid']}
            for setting, key in gs.LOCK_CLOCKS.items():
                if setting in after:
                    entry[setting] = after[setting]
                    if isinstance(after[setting], dict):
                        live['clocks'][key] = after[setting]['max_mhz'] if cap_mhz is None else cap_mhz
                        live['clocks_event_reasons'] = {'gpu_idle': False, 'sw_power_cap': cap_mhz is not None,
                                                        'applications_clocks_setting': True}
            if len(entry) > 1:
                gpus[gpu['pci_bus_id']] = entry
        if gpus:
            facts['nodeprep_contents'][pg.RECORD] = json.dumps({'boot_id': boot, 'gpus': gpus})
        if args['replay_file']:
            facts['nodeprep_files'][args['replay_file']] = (
                {'exists': False} if decided['replay'] is None else
                {'exists': True, 'type': 'file', 'uid': 0, 'gid': 0, 'mode': '0644',
                 'sha1': _plan.sha1_text(gs.replay_text(decided['replay']))})
    return facts


def run(facts, given=None, ctx=None):
    return _plan.finish(pg.plan(facts, given or settings(), ctx or context()))


def checks(plan_):
    return dict((check, _readiness.plan_check(check, plan_)['status']) for check in pg.CHECKS)


SETTLED = settle(node(), run(node(), settings(power_limit='70%')))
LOCKS = {'min': 1500, 'max': 1965}
SETTLED_LOCKED = settle(node(), run(node(), settings(power_limit='70%', locked_gpu_clocks=LOCKS)))


def with_gpus(facts, **values):
    facts = copy.deepcopy(facts)
    for gpu in facts['nvidia']['gpus']:
        for key, value in values.items():
            if isinstance(value, dict):
                gpu[key] = dict(gpu.get(key) or {}, **value)
            else:
                gpu[key] = value
    return facts


def test_a_fresh_node_gets_everything():
    plan_ = run(node(), settings(power_limit='70%'))
    assert plan_['problems'] == [] and plan_['errors'] == []
    assert plan_['reasons'] == [
        '/etc/nodeprep: missing (the settings are lost at the next reboot)',
        '/usr/local/sbin/nodeprep-gpu-settings: missing (the settings are lost at the next reboot)',
        '/etc/systemd/system/nodeprep-gpu-settings.service: missing (the settings are lost at the next reboot)',
        '/etc/systemd/system/multi-user.target.wants/nodeprep-gpu-settings.service: missing (the settings are lost '
        'at the next reboot)',
        ALL + ': power limit 1000 W, wanted 700 W',
        'the replay file /etc/nodeprep/gpu-settings.replay: missing (what the boot unit re-applies)',
    ]
    assert plan_['args']['nvidia_gpu'] == {
        'gpus': [g['pci_bus_id'] for g in B200['gpus']], 'persistence_mode': True, 'power_limit': '700',
        'power_limit_clamp': False, 'locked_gpu_clocks': None, 'locked_memory_clocks': None,
        'applications_clocks': None, 'skip_unsupported_applications_clocks': True, 'apply': True,
        'replay_file': CONFIG, 'host_label': 'node1', 'timeout': 60, 'state_dir': '/run/nodeprep',
        'nvidia_smi': '/usr/bin/nvidia-smi', 'persistenced': True, 'driver_pending': False,
        'driver_pending_persistenced': False}
    assert checks(plan_) == {'gpu.power_limit': 'fail', 'gpu.clocks': 'skip'}


def test_the_unit_file_is_rendered_once_with_the_managed_line():
    plan_ = run(node(files={pg.PLATFORM_PYTHON: {'exists': True, 'type': 'file'}}), settings(power_limit='70%'))
    unit = [f for f in plan_['files'] if f['path'] == pg.UNIT_PATH][0]
    assert unit['content'] == (
        '# Managed by gpufleet.nodeprep (gpu_settings); local changes are overwritten.\n'
        '# The driver forgets power limits and clock locks at every boot and driver reload;\n'
        '# this re-applies /etc/nodeprep/gpu-settings.replay (written by gpufleet.nodeprep.nvidia_gpu).\n'
        '[Unit]\n'
        'Description=Re-apply NVIDIA GPU power limit and clock settings (gpufleet.nodeprep)\n'
        'After=nvidia-persistenced.service\n'
        'Wants=nvidia-persistenced.service\n'
        'ConditionPathExists=/etc/nodeprep/gpu-settings.replay\n'
        '\n'
        '[Service]\n'
        'Type=oneshot\n'
        'RemainAfterExit=yes\n'
        'ExecStart=/usr/libexec/platform-python /usr/local/sbin/nodeprep-gpu-settings '
        '/etc/nodeprep/gpu-settings.replay\n'
        '\n'
        '[Install]\n'
        'WantedBy=multi-user.target\n')
    script = [f for f in plan_['files'] if f['path'] == pg.SCRIPT][0]
    assert (script['content'], script['mode']) == (SCRIPT, '0644')


def test_a_settled_node_needs_nothing_and_passes():
    plan_ = run(SETTLED, settings(power_limit='70%'))
    assert (plan_['reasons'], plan_['drift'], plan_['reports'], plan_['run']) == ([], [], [], [])
    assert plan_['checks']['gpu.power_limit'] == {
        'expected': 'power limit 70% on every GPU (nodeprep_gpu_settings_power_limit)',
        'observed': 'all 8 GPUs at 700 W', 'skip': None}
    assert checks(plan_) == {'gpu.power_limit': 'pass', 'gpu.clocks': 'skip'}


def test_an_out_of_band_power_cap_is_drift_no_run_fixes():
    """R19: current_power_limit 500 W beside requested_power_limit 700 W (the double's power-capped fault)."""
    capped = with_gpus(SETTLED, enforced_power_limit_w=500.0)
    plan_ = run(capped, settings(power_limit='70%'))
    msg = (ALL + ': the enforced power limit is 500 W, not the 700 W set: a cap set out of band (a BMC, DCGM or '
           'another power policy) limits the GPU; no run of gpu_settings changes it')
    assert plan_['reasons'] == []
    assert plan_['drift'] == [{'check': 'gpu.power_limit', 'msg': msg, 'level': 'warn', 'fixable': False}]
    assert plan_['reports'] == [msg]
    result = _readiness.plan_check('gpu.power_limit', plan_)
    assert (result['status'], result['observed']) == ('warn', 'all 8 GPUs at 500 W; ' + msg)


def test_a_lock_held_down_by_a_cap_is_drift_no_run_fixes():
    capped = with_gpus(SETTLED_LOCKED, clocks={'graphics_mhz': 1400},
                       clocks_event_reasons={'sw_power_cap': True})
    plan_ = run(capped, settings(power_limit='70%', locked_gpu_clocks=LOCKS))
    assert plan_['reasons'] == []
    msg = (ALL + ': locked_gpu_clocks 1500-1965 MHz recorded this boot, but the clock runs at 1400 MHz, held down '
           'by sw_power_cap: a power or thermal cap (set out of band: a BMC, DCGM or another power policy) wins over '
           'the lock; no run of gpu_settings changes it')
    assert [d['msg'] for d in plan_['drift']] == [msg]
    assert plan_['reports'] == [msg]
    result = _readiness.plan_check('gpu.clocks', plan_)
    assert result['observed'] == 'within the supported range on all 8 GPUs; ' + msg
    assert set((d['check'], d['level'], d['fixable']) for d in plan_['drift']) == {('gpu.clocks', 'warn', False)}
    assert checks(plan_) == {'gpu.power_limit': 'pass', 'gpu.clocks': 'warn'}


def test_a_lock_the_clocks_do_not_show_without_a_cap_stays_known():
    """The record says locked this boot, the clocks are at idle and nothing holds them down: nvidia-smi does not
    report the locked range, so the lock stays known, as nvidia_gpu (which decides from the same record) sees it;
    the plan asks for no lock the module would not apply (molecule's driver-reload step found that disagreement)."""
    idle = with_gpus(SETTLED_LOCKED, clocks={'graphics_mhz': 120},
                     clocks_event_reasons={'gpu_idle': True, 'applications_clocks_setting': False})
    plan_ = run(idle, settings(power_limit='70%', locked_gpu_clocks=LOCKS))
    assert plan_['reasons'] == []
    assert checks(plan_) == {'gpu.power_limit': 'pass', 'gpu.clocks': 'pass'}


def test_a_locked_node_passes_and_says_what_it_saw():
    plan_ = run(SETTLED_LOCKED, settings(power_limit='70%', locked_gpu_clocks=LOCKS))
    assert plan_['reasons'] == [] and plan_['drift'] == []
    assert plan_['checks']['gpu.clocks'] == {
        'expected': 'GPU clocks locked to 1500-1965 MHz; re-applied at boot by nodeprep-gpu-settings.service',
        'observed': 'within the supported range on all 8 GPUs; the locks recorded this boot show in the current '
                    'clocks', 'skip': None}


def test_an_out_of_range_limit_fails_on_the_node_and_clamp_clamps():
    plan_ = run(SETTLED, settings(power_limit=5000))
    assert plan_['errors'] == ['GPU 0 (00000000:8F:00.0) on node1: power_limit 5000 W is outside the allowed range '
                               '200.00-1000.00 W']
    assert checks(plan_) == {'gpu.power_limit': 'fail', 'gpu.clocks': 'skip'}
    clamped = run(SETTLED, settings(power_limit=5000, power_limit_clamp=True))
    assert clamped['errors'] == []
    assert clamped['args']['nvidia_gpu']['power_limit'] == '1000'
    assert clamped['reports'][0] == ('GPU 0 (00000000:8F:00.0) on node1: power_limit 5000 W is outside the allowed '
                                     'range 200.00-1000.00 W; clamped to 1000.00 W')


@pytest.mark.parametrize('name, value, message', [
    ('gpus', ['ALL'], 'nodeprep_gpu_settings_gpus=["ALL"]: "ALL" is not a GPU index, UUID or PCI bus id; expected '
                      '"all", or a list of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids (00000000:8F:00.0)'),
    ('gpus', ['0', 'GPU0'], 'nodeprep_gpu_settings_gpus=["0", "GPU0"]: "GPU0" is not a GPU index, UUID or PCI bus '
                            'id; expected "all", or a list of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids '
                            '(00000000:8F:00.0)'),
    ('gpus', [], 'nodeprep_gpu_settings_gpus=[]: expected "all", or a list of GPU indexes (0), UUIDs (GPU-...) or '
                 'PCI bus ids (00000000:8F:00.0)'),
    ('power_limit', 'lots', 'nodeprep_gpu_settings_power_limit="lots": null or watts (e.g. 700) or a percentage of '
                            'the default limit (e.g. "70%"), above 0 (must be watts (e.g. 700) or a percentage of '
                            'the default limit (e.g. "70%"), got \'lots\')'),
    ('power_limit', '-5%', 'nodeprep_gpu_settings_power_limit="-5%": null or watts (e.g. 700) or a percentage of '
                           'the default limit (e.g. "70%"), above 0 (must be watts (e.g. 700) or a percentage of '
                           'the default limit (e.g. "70%"), got \'-5%\')'),
    ('locked_gpu_clocks', {'min': 1965, 'max': 1500},
     'nodeprep_gpu_settings_locked_gpu_clocks={"max": 1500, "min": 1965}: null, "reset", or {min: MHz, max: MHz} '
     'with 0 < min <= max (min (1965) must be at least 1 and not above max (1500))'),
    ('locked_memory_clocks', 'off', 'nodeprep_gpu_settings_locked_memory_clocks="off": null, "reset", or {min: MHz, '
                                    'max: MHz} with 0 < min <= max (must be "reset" or a dict with the keys min and '
                                    'max (MHz), got \'off\')'),
    ('timeout', 0, 'nodeprep_gpu_settings_timeout=0: at least 1 second'),
    ('config_path', 'gpu.replay', 'nodeprep_gpu_settings_config_path="gpu.replay": an absolute path of a file'),
])
def test_bad_settings_are_problems_naming_the_value(name, value, message):
    plan_ = run(SETTLED, settings(**{name: value}))
    assert plan_['problems'] == [message]
    assert (plan_['reasons'], plan_['files'], plan_['args']) == ([], [], {})
    assert checks(plan_) == {'gpu.power_limit': 'fail', 'gpu.clocks': 'fail'}


@pytest.mark.parametrize('gpus', [['all'], ['0', '1', '2', '3', '4', '5', '6', '7'], ['8F:00.0', '0000:90:00.0'],
                                  ['GPU-00000002-0000-4000-8000-000000000000']])
def test_selection_forms_are_accepted(gpus):
    assert run(SETTLED, settings(gpus=gpus))['problems'] == []


def test_no_gpu_read_is_a_report_or_an_error():
    nvidia = {'present': False, 'error': 'nvidia-smi not found in PATH', 'gpus': [], 'nvidia_smi': None}
    plan_ = run(node(nvidia))
    assert plan_['reports'] == ['Skipping gpu_settings on node1: no working NVIDIA driver/GPU (nvidia-smi not found '
                                'in PATH). Set nodeprep_gpu_settings_require_gpu=true to make this an error.']
    assert 'nvidia_gpu' not in plan_['args']
    required = run(node(nvidia), settings(require_gpu=True))
    assert required['errors'] == ['nodeprep_gpu_settings_require_gpu is true but ansible_facts.nvidia.present is '
                                  'false on node1 (nvidia-smi not found in PATH).']


def test_check_mode_on_a_fresh_node_predicts_from_the_driver_defaults():
    nvidia = {'present': False, 'error': 'nvidia-smi not found in PATH', 'gpus': [], 'nvidia_smi': None}
    plan_ = run(node(nvidia), settings(power_limit='70%'), context(check_mode=True,
                                                                   driver_pending={'persistenced': True}))
    assert plan_['reasons'][-1] == 'power limit 70%: the driver starts at the default limit'
    assert plan_['args']['nvidia_gpu']['driver_pending'] is True
    assert plan_['args']['nvidia_gpu']['driver_pending_persistenced'] is True
    assert plan_['args']['nvidia_gpu']['gpus'] == ['all']
    assert plan_['args']['nvidia_gpu']['power_limit'] == '70%'
    # The driver's defaults asked for: only the boot files.
    same = run(node(nvidia), settings(power_limit='100%'), context(check_mode=True,
                                                                   driver_pending={'persistenced': True}))
    assert 'nvidia_gpu' not in same['args']


def test_without_persistenced_persistence_mode_is_set_and_replayed():
    facts = node(daemon=False)
    plan_ = run(facts, settings(power_limit='70%'))
    assert plan_['reasons'][4:6] == [ALL + ': persistence mode disabled, wanted enabled',
                                     ALL + ': power limit 1000 W, wanted 700 W']
    assert plan_['args']['nvidia_gpu']['persistenced'] is False
    settled = settle(facts, plan_)
    assert run(settled, settings(power_limit='70%'))['reasons'] == []


def test_apply_false_only_keeps_the_replay_file():
    plan_ = run(node(), settings(power_limit='70%', apply=False))
    assert plan_['reasons'][-1] == 'the replay file /etc/nodeprep/gpu-settings.replay: missing (what the boot unit ' \
                                   're-applies)'
    assert [r for r in plan_['reasons'] if 'power limit' in r] == []
    assert checks(plan_) == {'gpu.power_limit': 'warn', 'gpu.clocks': 'skip'}


def test_a_partial_read_is_drift_no_run_fixes():
    partial = copy.deepcopy(SETTLED)
    partial['nvidia'].update(partial=True, error='Unable to determine the device handle for gpu 0000:97:00.0',
                             attached_gpus=9)
    plan_ = run(partial, settings(power_limit='70%'))
    assert plan_['drift'] == [{'check': 'gpu.power_limit', 'level': 'fail', 'fixable': False, 'msg': (
        'nvidia-smi printed 8 of 9 attached GPUs (Unable to determine the device handle for gpu 0000:97:00.0); only '
        'the printed GPUs are managed and checked')}]
    assert plan_['reasons'] == []


def test_a_failed_boot_unit_is_reported():
    failed = copy.deepcopy(SETTLED_LOCKED)
    failed['nodeprep_units'][pg.UNIT] = {'active': 'failed'}
    plan_ = run(failed, settings(power_limit='70%', locked_gpu_clocks=LOCKS))
    assert checks(plan_) == {'gpu.power_limit': 'warn', 'gpu.clocks': 'fail'}
    assert plan_['reasons'] == []


def test_facts_not_gathered_are_missing():
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans._plan import missing_facts
    facts = node()
    del facts['nodeprep_contents']
    assert missing_facts(pg.gather(settings()), facts)['contents'] == [pg.RECORD, pg.BOOT_ID]


CASES = [
    ('fresh', node(), settings(power_limit='70%')),
    ('settled', SETTLED, settings(power_limit='70%')),
    ('settled, limit raised', SETTLED, settings(power_limit='100%')),
    ('locks on a fresh node', node(), settings(power_limit='70%', locked_gpu_clocks=LOCKS)),
    ('locks settled', SETTLED_LOCKED, settings(power_limit='70%', locked_gpu_clocks=LOCKS)),
    ('locks reset', SETTLED_LOCKED, settings(power_limit='70%', locked_gpu_clocks='reset')),
    ('no daemon', node(daemon=False), settings(power_limit='72.5%')),
    ('defaults', node(), settings()),
    ('replay only', node(), settings(power_limit='70%', apply=False)),
    ('no boot files', node(), settings(power_limit='70%', boot_persist=False)),
    ('chosen GPUs', node(), settings(power_limit=650, gpus=['0', '00000000:90:00.0'])),
    ('clamped', node(), settings(power_limit='150%', power_limit_clamp=True)),
    ('memory lock', node(), settings(locked_memory_clocks={'min': 7680, 'max': 7680})),
]


@pytest.mark.parametrize('facts, given', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_no_reasons_exactly_when_the_checks_pass(facts, given):
    plan_ = run(facts, given)
    statuses = checks(plan_)
    assert (plan_['reasons'] == []) == all(s in ('pass', 'skip') for s in statuses.values()), (plan_['reasons'],
                                                                                               statuses)


@pytest.mark.parametrize('facts, given', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_applying_the_plan_leaves_nothing_to_do(facts, given):
    plan_ = run(facts, given)
    again = run(settle(facts, plan_), given)
    assert again['reasons'] == []
    assert _plan.fixable_drift(again) == []
    assert 'nvidia_gpu' not in again['args']
    assert all(entry['change'] is None for entry in again['files'])


def test_the_module_and_the_plan_compute_the_same_replay():
    """nvidia_gpu given the plan's arguments writes the replay file whose SHA-1 the plan compares."""
    facts = node(daemon=False)
    plan_ = run(facts, settings(power_limit='72.5%', locked_gpu_clocks=LOCKS))
    decided = gpu_module(facts, plan_['args']['nvidia_gpu'])
    assert decided['replay']['commands'][:3] == [
        ['/usr/bin/nvidia-smi', '-i', '00000000:8F:00.0', '-pm', '1'],
        ['/usr/bin/nvidia-smi', '-i', '00000000:8F:00.0', '-pl', '725'],
        ['/usr/bin/nvidia-smi', '-i', '00000000:8F:00.0', '-lgc', '1500,1965']]
    assert decided['replay']['record_path'] == '/run/nodeprep/nvidia_gpu_locks.json'


# ---------------------------------------------------------------------------------------------------------------------
# Agreement with readiness (tests/unit/plugins/module_utils/plans/agreement.py): the rows of CASES and the odd node
# states - a power cap set out of band, a lock held down by a cap, a limit back at the default, a partial nvidia-smi
# read, a failed boot unit, values the GPUs refuse, no GPU read, a node that is not a GPU node.

def _changed(facts, **files):
    facts = copy.deepcopy(facts)
    facts['nodeprep_files'].update(files)
    return facts


def _partial(facts):
    facts = copy.deepcopy(facts)
    facts['nvidia'].update(partial=True, error='Unable to determine the device handle for gpu 0000:97:00.0',
                           attached_gpus=9)
    return facts


def _unit_failed(facts):
    facts = copy.deepcopy(facts)
    facts['nodeprep_units'][pg.UNIT] = {'active': 'failed'}
    return facts


NO_GPU_READ = {'present': False, 'error': 'nvidia-smi not found in PATH', 'gpus': [], 'nvidia_smi': None}
PL, CL = 'gpu.power_limit', 'gpu.clocks'
# (name, facts, settings) -> (work, refuses, {gpu.power_limit: status, gpu.clocks: status})
AGREEMENT = [
    ('fresh', node(), settings(power_limit='70%'), (True, False, {PL: 'fail', CL: 'skip'})),
    ('settled', SETTLED, settings(power_limit='70%'), (False, False, {PL: 'pass', CL: 'skip'})),
    ('settled, limit raised', SETTLED, settings(power_limit='100%'), (True, False, {PL: 'fail', CL: 'skip'})),
    ('locks on a fresh node', node(), settings(power_limit='70%', locked_gpu_clocks=LOCKS),
     (True, False, {PL: 'fail', CL: 'fail'})),
    ('locks settled', SETTLED_LOCKED, settings(power_limit='70%', locked_gpu_clocks=LOCKS),
     (False, False, {PL: 'pass', CL: 'pass'})),
    ('locks reset', SETTLED_LOCKED, settings(power_limit='70%', locked_gpu_clocks='reset'),
     (True, False, {PL: 'warn', CL: 'fail'})),
    ('no daemon', node(daemon=False), settings(power_limit='72.5%'), (True, False, {PL: 'fail', CL: 'skip'})),
    ('defaults: only the boot files', node(), settings(), (True, False, {PL: 'warn', CL: 'skip'})),
    ('replay only', node(), settings(power_limit='70%', apply=False), (True, False, {PL: 'warn', CL: 'skip'})),
    ('no boot files', node(), settings(power_limit='70%', boot_persist=False), (True, False, {PL: 'fail', CL: 'skip'})),
    ('chosen GPUs', node(), settings(power_limit=650, gpus=['0', '00000000:90:00.0']),
     (True, False, {PL: 'fail', CL: 'skip'})),
    ('clamped', node(), settings(power_limit='150%', power_limit_clamp=True), (True, False, {PL: 'warn', CL: 'skip'})),
    ('a memory lock above what the GPUs support', node(), settings(locked_memory_clocks={'min': 7680, 'max': 7680}),
     (True, True, {PL: 'skip', CL: 'fail'})),
    ('a power cap set out of band', with_gpus(SETTLED, enforced_power_limit_w=500.0), settings(power_limit='70%'),
     (False, False, {PL: 'warn', CL: 'skip'})),
    ('a lock held down by a cap', with_gpus(SETTLED_LOCKED, clocks={'graphics_mhz': 1400},
                                            clocks_event_reasons={'sw_power_cap': True}),
     settings(power_limit='70%', locked_gpu_clocks=LOCKS), (False, False, {PL: 'pass', CL: 'warn'})),
    ('the limit back at the default (a driver reload)', with_gpus(SETTLED, power_limit_w=1000.0,
                                                                  enforced_power_limit_w=1000.0),
     settings(power_limit='70%'), (True, False, {PL: 'fail', CL: 'skip'})),
    ('a limit outside the range the GPUs allow', SETTLED, settings(power_limit=5000),
     (False, True, {PL: 'fail', CL: 'skip'})),
    ('a lock above the supported clocks', SETTLED,
     settings(power_limit='70%', locked_gpu_clocks={'min': 1500, 'max': 2100}), (False, True, {PL: 'pass', CL: 'fail'})),
    ('a limit that is not one', SETTLED, settings(power_limit='lots'), (False, True, {PL: 'fail', CL: 'fail'})),
    ('no GPU read: the boot files only, the check warns', node(NO_GPU_READ), settings(power_limit='70%'),
     (True, False, {PL: 'warn', CL: 'skip'})),
    # The role fails there (require_gpu): the check fails with its words (it only warned on the boot files before).
    ('no GPU read with require_gpu', node(NO_GPU_READ), settings(power_limit='70%', require_gpu=True),
     (True, True, {PL: 'fail', CL: 'skip'})),
    ('the boot unit failed at its last run', _unit_failed(SETTLED_LOCKED),
     settings(power_limit='70%', locked_gpu_clocks=LOCKS), (False, False, {PL: 'warn', CL: 'fail'})),
    ('nvidia-smi printed 8 of 9 GPUs', _partial(SETTLED), settings(power_limit='70%'),
     (False, False, {PL: 'fail', CL: 'skip'})),
    ('the boot unit not enabled: the settings are lost at the next boot',
     _changed(SETTLED, **{pg.UNIT_LINK: {'exists': False}}), settings(power_limit='70%'),
     (True, False, {PL: 'warn', CL: 'skip'})),
    ('not a GPU node (nodeprep_gpu_node false)', SETTLED, dict(settings(power_limit='70%'), nodeprep_gpu_node=False),
     (False, False, {PL: 'skip', CL: 'skip'})),
]


@pytest.mark.parametrize('name, facts, given, want', AGREEMENT, ids=[row[0] for row in AGREEMENT])
def test_agreement_table(name, facts, given, want):
    work, refuses, statuses = want
    agreement.assert_agrees(name, _plan.plan_with(pg, facts, given, (), context()), pg.CHECKS, work, refuses,
                            statuses)
