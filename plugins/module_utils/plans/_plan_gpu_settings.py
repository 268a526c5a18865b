# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The gpu_settings role's plan (see plans/_plan.py for the plan's shape).

Every rule is _gpu_settings' (selection, the power limit forms, rounding, range and tolerance, clocks, the commands
now and after a boot, the lock record, the volatile-settings rule); this file only reads the settings once, the
gathered facts once, and says what the role's tasks do: the boot script, unit and link with their full content, and
the arguments of the one nvidia_gpu call.  The module and the plan agree on every input because the plan passes
them: the nvidia-smi path the gather read (``ansible_facts.nvidia.nvidia_smi``), the state directory whose lock
record it read, and whether nvidia-persistenced runs (the gathered unit state) - nvidia_gpu finds none of them
again.  The power limit is parsed and checked here once; nvidia_gpu gets the selected GPUs by PCI bus id and the
watts decided (or, where the GPUs of one node differ, the same request and clamp, which the same function resolves).

Readiness: ``gpu.power_limit`` and ``gpu.clocks`` pass exactly when this plan has no drift for them.  What no run of
the role fixes is drift with ``fixable`` False: an enforced power limit below the one set (a cap set out of band by
a BMC, DCGM or another power policy), a clock lock that the record says is applied but that a cap holds down, the
boot unit's last run failed, GPUs nvidia-smi could not print.

Pure functions; no Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import posixpath

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_settings as gs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._path_changes import path_change

ROLE = 'gpu_settings'
POWER = 'gpu.power_limit'
CLOCKS = 'gpu.clocks'
CHECKS = (POWER, CLOCKS)
PREFIX = 'nodeprep_gpu_settings_'

SCRIPT = '/usr/local/sbin/nodeprep-gpu-settings'
UNIT = 'nodeprep-gpu-settings.service'
UNIT_DIR = '/etc/systemd/system'
UNIT_PATH = posixpath.join(UNIT_DIR, UNIT)
UNIT_LINK = posixpath.join(UNIT_DIR, 'multi-user.target.wants', UNIT)
# The boot unit runs the script with the platform's Python: EL8's platform-python where it exists (python3 is
# optional there), else /usr/bin/python3 (EL9 and later, Ubuntu, Debian).
PLATFORM_PYTHON = '/usr/libexec/platform-python'
PYTHON3 = '/usr/bin/python3'
# nvidia_gpu's state directory (a tmpfs: emptied exactly when the driver forgets the locks) and its lock record.
STATE_DIR = '/run/nodeprep'
RECORD = posixpath.join(STATE_DIR, gs.LOCK_RECORD)
BOOT_ID = '/proc/sys/kernel/random/boot_id'
PERSISTENCED = 'nvidia-persistenced.service'
# Where the commands point before the driver is installed (check mode on a fresh node: nothing was read).
NVIDIA_SMI = '/usr/bin/nvidia-smi'

ROLE_FILES = {'script': 'files/nodeprep-gpu-settings'}

_CLOCK_RANGE = 'null, "reset", or {min: MHz, max: MHz} with 0 < min <= max'

SETTINGS = {
    PREFIX + 'apply': {
        'type': 'bool', 'default': True,
        'description': 'Apply the settings to the running GPUs now (through M(gpufleet.nodeprep.nvidia_gpu)).'},
    PREFIX + 'boot_persist': {
        'type': 'bool', 'default': True,
        'description': ['Write the replay file O(nodeprep_gpu_settings_config_path), install the re-apply script and '
                        'enable C(nodeprep-gpu-settings.service), which re-applies the settings at every boot (the '
                        'driver forgets power limits and clock locks).']},
    PREFIX + 'require_gpu': {
        'type': 'bool', 'default': False,
        'description': 'Fail, instead of skipping with a message, on hosts whose facts show no working NVIDIA GPU.'},
    PREFIX + 'gpus': {
        'type': 'list', 'elements': 'str', 'default': 'all',
        'description': ['V(all), or a list of GPU indexes, UUIDs or PCI bus ids (as C(nvidia-smi) prints them, with '
                        'or without the 8-digit domain).',
                        'Anything else (V(ALL), V(GPU0)) is refused before a GPU is read.']},
    PREFIX + 'persistence_mode': {
        'type': 'bool', 'default': True,
        'description': ['Wanted persistence mode; V(null) leaves it alone.',
                        'C(nvidia-persistenced) (see the nvidia_driver role) is the preferred way to keep it '
                        'enabled; with the daemon running this is a no-op.']},
    PREFIX + 'power_limit': {
        'type': 'raw', 'default': None,
        'description': ['Power limit in watts (for example V(700) or V(700W)) or as a percentage of each GPU\'s '
                        'default limit (for example V(70%)); V(null) leaves it alone. Rounded to whole watts, half '
                        'up (67% of 1000 W is 670 W).',
                        'The ramp from the article, start capped and raise later, is a change of this one variable '
                        '(V(70%), later V(100%)).']},
    PREFIX + 'power_limit_clamp': {
        'type': 'bool', 'default': False,
        'description': 'Clamp a limit outside a GPU\'s min/max to the nearest bound instead of failing.'},
    PREFIX + 'locked_gpu_clocks': {
        'type': 'raw', 'default': None,
        'description': ['Locked GPU clocks as a dict with C(min) and C(max) in MHz, V(reset) to unlock, or V(null) '
                        'to leave alone.',
                        'Valid values are listed by C(nvidia-smi -q -d SUPPORTED_CLOCKS).']},
    PREFIX + 'locked_memory_clocks': {
        'type': 'raw', 'default': None,
        'description': 'Locked memory clocks as a dict with C(min) and C(max) in MHz, V(reset), or V(null).'},
    PREFIX + 'applications_clocks': {
        'type': 'dict', 'default': None,
        'options': {
            'memory': {'type': 'int', 'required': True, 'description': 'Memory clock in MHz.'},
            'graphics': {'type': 'int', 'required': True, 'description': 'Graphics clock in MHz.'},
        },
        'description': ['Application clocks (C(memory) and C(graphics) in MHz), or V(null).',
                        'Deprecated by NVIDIA since CUDA 13.0; skipped with a message where the facts show the '
                        'driver no longer reports them. Prefer locked clocks.']},
    PREFIX + 'timeout': {
        'type': 'int', 'default': 60,
        'description': 'Seconds nvidia-smi may take, for the facts and for each change.'},
    PREFIX + 'config_path': {
        'type': 'path', 'default': '/etc/nodeprep/gpu-settings.replay',
        'description': ['Where C(nvidia_gpu) writes the replay file (the exact nvidia-smi commands, as JSON argv '
                        'lists) that '
                        'C(nodeprep-gpu-settings.service) runs at boot. Removed when there is nothing to replay.']},
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (rules/_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)


def _s(settings, name):
    return settings[PREFIX + name]


def gather(settings):
    request = _plan.new_gather()
    request['subsets'] = ['nvidia']
    request['units'] = [PERSISTENCED, UNIT]
    config = _s(settings, 'config_path') or SETTINGS[PREFIX + 'config_path']['default']
    request['files'] = [PLATFORM_PYTHON, posixpath.dirname(config), config, SCRIPT, UNIT_PATH, UNIT_LINK]
    request['contents'] = [RECORD, BOOT_ID]
    return request


# -- the settings, checked once ---------------------------------------------------------------------------------------

def check_settings(plan, settings):
    """Add a problem for every setting that cannot be used; return ``wanted`` (gs.parse_settings) or None."""
    name = PREFIX + 'gpus'
    problem = gs.selection_problem(settings[name])
    if problem:
        _plan.add_problem(plan, name, settings[name], problem)
    forms = (('persistence_mode', 'true, false or null'),
             ('power_limit', 'null or ' + gs.POWER_LIMIT_FORMS + ', above 0'),
             ('locked_gpu_clocks', _CLOCK_RANGE), ('locked_memory_clocks', _CLOCK_RANGE),
             ('applications_clocks', 'null or {memory: MHz, graphics: MHz}'))
    for key, allowed in forms:
        try:
            gs.parse_settings({key: settings[PREFIX + key]})
        except gs.GpuSettingsError as exc:
            _plan.add_problem(plan, PREFIX + key, settings[PREFIX + key],
                              '{0} ({1})'.format(allowed, exc.msg[len(key):].lstrip(': ')
                                                 if exc.msg.startswith(key) else exc.msg))
    if settings[PREFIX + 'timeout'] < 1:
        _plan.add_problem(plan, PREFIX + 'timeout', settings[PREFIX + 'timeout'], 'at least 1 second')
    config = settings[PREFIX + 'config_path']
    if not isinstance(config, str) or not config.startswith('/') or config.endswith('/'):
        _plan.add_problem(plan, PREFIX + 'config_path', config, 'an absolute path of a file')
    if plan['problems']:
        return None
    return gs.parse_settings(dict((key, settings[PREFIX + key]) for key, dummy in forms))


# -- words ------------------------------------------------------------------------------------------------------------

def _w(value):
    return '?' if value is None else '{0:g}'.format(float(value))


def _gpus_text(gpus):
    return 'GPU {0}'.format(gpus[0]) if len(gpus) == 1 else 'GPUs {0}'.format(', '.join(str(g) for g in gpus))


def _clock_text(value):
    if value is None:
        return 'unlocked'
    if value == 'unknown':
        return 'no lock recorded this boot'
    if isinstance(value, dict) and 'min_mhz' in value:
        return '{0}-{1} MHz'.format(value['min_mhz'], value['max_mhz'])
    if isinstance(value, dict):
        return '{0},{1} MHz'.format(value.get('mem_mhz'), value.get('graphics_mhz'))
    return str(value)


def expected_words(settings, wanted):
    """The readiness report's ``expected`` for both checks (``not managed ...`` where the role leaves it alone)."""
    apply = _s(settings, 'apply')
    every = 'every GPU' if _s(settings, 'gpus') in ('all', ['all']) else 'the chosen GPUs'
    if 'power_limit' in wanted and apply:
        power = 'power limit {0} on {1} ({2}power_limit)'.format(
            gs.describe_power_limit(wanted['power_limit']), every, PREFIX)
    else:
        power = 'not managed ({0}power_limit unset or {0}apply false)'.format(PREFIX)
    parts = []
    for key, what in (('locked_gpu_clocks', 'GPU clocks'), ('locked_memory_clocks', 'memory clocks')):
        if key in wanted:
            parts.append('{0} lock reset'.format(what) if wanted[key] is None else '{0} locked to {1}'.format(
                what, _clock_text(wanted[key])))
    if isinstance(wanted.get('applications_clocks'), dict):
        parts.append('applications clocks {0}'.format(_clock_text(wanted['applications_clocks'])))
    if parts and apply:
        clocks = '; '.join(parts) + ('; re-applied at boot by ' + UNIT if _s(settings, 'boot_persist') else '')
    else:
        clocks = 'not managed (no clock settings or {0}apply false)'.format(PREFIX)
    return power, clocks


def _managed(words):
    return [check for check, text in zip(CHECKS, words) if not text.startswith('not managed')]


# -- files ------------------------------------------------------------------------------------------------------------

def unit_text(python, config_path):
    return '\n'.join([
        _plan.managed_line(ROLE),
        '# The driver forgets power limits and clock locks at every boot and driver reload;',
        '# this re-applies {0} (written by gpufleet.nodeprep.nvidia_gpu).'.format(config_path),
        '[Unit]',
        'Description=Re-apply NVIDIA GPU power limit and clock settings (gpufleet.nodeprep)',
        'After=nvidia-persistenced.service',
        'Wants=nvidia-persistenced.service',
        'ConditionPathExists={0}'.format(config_path),
        '',
        '[Service]',
        'Type=oneshot',
        'RemainAfterExit=yes',
        'ExecStart={0} {1} {2}'.format(python, SCRIPT, config_path),
        '',
        '[Install]',
        'WantedBy=multi-user.target',
        ''])


def platform_python(facts):
    files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
    return PLATFORM_PYTHON if (files.get(PLATFORM_PYTHON) or {}).get('exists') else PYTHON3


def boot_files(plan, facts, settings, context, checks):
    """The directory, script, unit and link of the boot-time re-apply; a change is drift for ``checks``."""
    config = _s(settings, 'config_path')
    changes = []
    script = (context.get('role_files') or {}).get('script')
    if script is None:
        plan['errors'].append('the boot script (roles/gpu_settings/files/nodeprep-gpu-settings) was not handed to '
                              'the plan')
        script = ''
    entries = [
        _plan.want_path(plan, facts, posixpath.dirname(config), state='directory', mode='0755'),
        # run by the unit through the platform's Python, not executed directly
        _plan.want_path(plan, facts, SCRIPT, content=script, mode='0644'),
        _plan.want_path(plan, facts, UNIT_PATH, content=unit_text(platform_python(facts), config), mode='0644'),
        # What `systemctl enable` does for WantedBy=multi-user.target, as a link, so that check mode on a fresh node
        # predicts it (systemctl cannot enable a unit that check mode has not written).
        _plan.want_path(plan, facts, UNIT_LINK, state='link', src=UNIT_PATH),
    ]
    for entry in entries:
        if entry['change']:
            changes.append(entry['change'])
            # said below, as drift of the readiness checks (with why it matters)
            plan['reasons'].remove(entry['change'])
    for change in changes:
        for check in checks:
            level = 'fail' if check == CLOCKS and _locks_wanted(settings) else 'warn'
            _drift(plan, check, change + ' (the settings are lost at the next reboot)', True, level)
    return changes


def _locks_wanted(settings):
    return any(isinstance(_s(settings, key), dict) for key in ('locked_gpu_clocks', 'locked_memory_clocks'))


def _drift(plan, check, msg, fixable=True, level='fail'):
    """add_drift, without the same message twice for one check."""
    if not any(item['check'] == check and item['msg'] == msg for item in plan['drift']):
        _plan.add_drift(plan, check, msg, fixable=fixable, level=level)
    elif fixable and msg not in plan['reasons']:
        plan['reasons'].append(msg)


# -- the GPUs ---------------------------------------------------------------------------------------------------------

def _record(facts):
    contents = facts.get('nodeprep_contents') if isinstance(facts.get('nodeprep_contents'), dict) else {}
    try:
        record = json.loads(contents.get(RECORD) or 'null')
    except ValueError:
        record = None
    return record, (contents.get(BOOT_ID) or '').strip() or None


def _daemon(facts):
    units = facts.get('nodeprep_units') if isinstance(facts.get('nodeprep_units'), dict) else {}
    return (units.get(PERSISTENCED) or {}).get('active') == 'active'


def module_args(settings, wanted, context, selected=None, decided=None, nvidia_smi=NVIDIA_SMI, daemon=False,
                pending=None):
    """The arguments of the role's one nvidia_gpu task: what this plan decided, and every input it decided with."""
    args = {
        'gpus': [g['pci_bus_id'] for g in selected] if selected is not None else (
            ['all'] if _s(settings, 'gpus') in ('all', ['all']) else list(_s(settings, 'gpus'))),
        'persistence_mode': wanted.get('persistence_mode'),
        'power_limit': None,
        'power_limit_clamp': False,
        'locked_gpu_clocks': None,
        'locked_memory_clocks': None,
        'applications_clocks': None,
        'skip_unsupported_applications_clocks': True,
        'apply': _s(settings, 'apply'),
        'replay_file': _s(settings, 'config_path') if _s(settings, 'boot_persist') else None,
        'host_label': context.get('host') or None,
        'timeout': _s(settings, 'timeout'),
        'state_dir': STATE_DIR,
        'nvidia_smi': nvidia_smi,
        'persistenced': daemon,
        'driver_pending': pending is not None,
        'driver_pending_persistenced': bool((pending or {}).get('persistenced')),
    }
    if 'power_limit' in wanted:
        watts = sorted(set(p['after']['power_limit_w'] for p in (decided or {}).get('plans') or []))
        if len(watts) == 1:
            # The watts decided (within every selected GPU's range, clamped where asked): nothing left to resolve.
            args['power_limit'] = gs.watts_arg(watts[0])
        else:
            kind, number = wanted['power_limit']
            args['power_limit'] = '{0:g}%'.format(number) if kind == 'percent' else '{0:g}'.format(number)
            args['power_limit_clamp'] = _s(settings, 'power_limit_clamp')
    for key in ('locked_gpu_clocks', 'locked_memory_clocks'):
        if key in wanted:
            value = wanted[key]
            args[key] = 'reset' if value is None else {'min': value['min_mhz'], 'max': value['max_mhz']}
    app = (decided or {}).get('wanted', wanted).get('applications_clocks')
    if app == 'reset':
        args['applications_clocks'] = 'reset'
    elif isinstance(app, dict):
        args['applications_clocks'] = {'memory': app['mem_mhz'], 'graphics': app['graphics_mhz']}
    return args


def _command_drift(plan, selected, plans, managed):
    """Drift for each setting a command changes, grouped by (setting, before, after) over the GPUs."""
    groups = []
    for gpu, result in zip(selected, plans):
        for argv in result['commands']:
            flag = argv[3]
            if flag == '-pl':
                key = ('power limit', POWER, _w(result['before']['power_limit_w']) + ' W',
                       _w(result['after']['power_limit_w']) + ' W')
            elif flag == '-pm':
                key = ('persistence mode', POWER, 'enabled' if result['before']['persistence_mode'] else 'disabled',
                       'enabled' if result['after']['persistence_mode'] else 'disabled')
            elif flag in ('-ac', '-rac'):
                key = ('applications clocks', CLOCKS, _clock_text(result['before']['applications_clocks']),
                       _clock_text(result['after']['applications_clocks']))
            else:
                setting = 'locked_gpu_clocks' if flag in ('-lgc', '-rgc') else 'locked_memory_clocks'
                key = (setting.replace('_', ' '), CLOCKS, _clock_text(result['before'][setting]),
                       _clock_text(result['after'][setting]))
            for group in groups:
                if group[0] == key:
                    group[1].append(gpu['index'])
                    break
            else:
                groups.append((key, [gpu['index']]))
    for (what, check, before, after), indexes in groups:
        if check not in managed:
            check = managed[0] if managed else POWER
        _drift(plan, check, '{0}: {1} {2}, wanted {3}'.format(_gpus_text(indexes), what, before, after))


def _power_enforced(plan, selected, plans):
    """The enforced limit (current_power_limit) below the one set: drift no run fixes (a cap set out of band)."""
    capped = {}
    for gpu, result in zip(selected, plans):
        wanted = result['after'].get('power_limit_w')
        enforced = gpu.get('enforced_power_limit_w')
        if wanted is None or enforced is None or not gs.power_limit_matches(gpu.get('power_limit_w'), wanted):
            continue
        if not gs.power_limit_matches(enforced, wanted):
            capped.setdefault((_w(enforced), _w(wanted)), []).append(gpu['index'])
    for (enforced, wanted), indexes in sorted(capped.items()):
        msg = ('{0}: the enforced power limit is {1} W, not the {2} W set: a cap set out of band (a BMC, DCGM or '
               'another power policy) limits the GPU; no run of gpu_settings changes it').format(
                   _gpus_text(indexes), enforced, wanted)
        _drift(plan, POWER, msg, fixable=False, level='warn')
        plan['reports'].append(msg)


def _observed_power(selected, plans):
    values = []
    for gpu in selected:
        enforced = gpu.get('enforced_power_limit_w')
        values.append(_w(enforced if enforced is not None else gpu.get('power_limit_w')))
    return 'all {0} GPUs at {1} W'.format(len(selected), ' / '.join(sorted(set(values))))


def _locks_of(record, boot, held):
    """known_locks (what nvidia_gpu decides from); a lock that a cap holds down is added to ``held``
    ({(setting, lock text, clock, caps): [GPU indexes]}), drift no run fixes."""
    def locks_of(gpu):
        # What nvidia_gpu itself knows locked (gs.known_locks): the plan and the module decide from the same record.
        known = gs.known_locks(record, boot, gpu)
        for setting, caps in sorted(gs.held_down_locks(record, boot, gpu).items()):
            key = (setting, _clock_text(known[setting]), (gpu.get('clocks') or {}).get(gs.LOCK_CLOCKS[setting]),
                   ', '.join(caps))
            held.setdefault(key, []).append(gpu['index'])
        return known
    return locks_of


def _locks_held_down(plan, held):
    for (setting, lock, clock, caps), indexes in sorted(held.items()):
        msg = ('{0}: {1} {2} recorded this boot, but the clock runs at {3} MHz, held down by {4}: a power or thermal '
               'cap (set out of band: a BMC, DCGM or another power policy) wins over the lock; no run of '
               'gpu_settings changes it').format(_gpus_text(indexes), setting, lock, clock, caps)
        _drift(plan, CLOCKS, msg, fixable=False, level='warn')
        plan['reports'].append(msg)


def plan_gpus(plan, facts, settings, context, wanted, managed):
    """What nvidia_gpu changes on the GPUs that nvidia-smi printed; the module's arguments."""
    nvidia = facts['nvidia']
    record, boot = _record(facts)
    daemon = _daemon(facts)
    smi = nvidia.get('nvidia_smi') or NVIDIA_SMI

    def argv(gpu, *args):
        return [smi, '-i', gpu['pci_bus_id']] + list(args)

    host = context.get('host') or None
    config = _s(settings, 'config_path')
    held = {}
    try:
        decided = gs.plan_settings(nvidia, wanted, _s(settings, 'gpus'), _locks_of(record, boot, held),
                                   daemon, argv, _s(settings, 'power_limit_clamp'), host, True,
                                   RECORD if _s(settings, 'boot_persist') else None)
    except gs.GpuSettingsError as exc:
        plan['errors'].append(exc.msg)
        # The check of the setting the message is about (the role fails on the node, changing nothing).
        about = [check for check, word in ((POWER, 'power'), (CLOCKS, 'clocks'))
                 if word in exc.msg and check in managed]
        for check in about or managed or [POWER]:
            _drift(plan, check, exc.msg, fixable=False)
        return None
    # What the role says even with nothing to do: applications clocks left alone, a limit clamped (the module's
    # note that nvidia-persistenced manages persistence mode is no report: the module says it when it runs).
    for warning in decided['warnings'] + [w for p in decided['plans'] for w in p['warnings']
                                          if 'nvidia-persistenced is running' not in w]:
        if warning not in plan['reports']:
            plan['reports'].append(warning)
    for warning in decided['warnings']:
        # applications clocks the driver no longer supports: left alone, which no run of the role changes
        _drift(plan, CLOCKS, warning, fixable=False, level='warn')
    selected, plans = decided['selected'], decided['plans']
    if _s(settings, 'apply'):
        _command_drift(plan, selected, plans, managed)
    if POWER in managed:
        _power_enforced(plan, selected, plans)
        _plan.set_check(plan, POWER, plan['checks'][POWER]['expected'], _observed_power(selected, plans),
                        None if selected else 'nvidia-smi lists no GPU')
    _locks_held_down(plan, held)
    if CLOCKS in managed:
        observed = 'within the supported range on all {0} GPUs'.format(len(selected))
        if _locks_wanted(settings) and not held:
            observed += '; the locks recorded this boot show in the current clocks'
        _plan.set_check(plan, CLOCKS, plan['checks'][CLOCKS]['expected'], observed,
                        None if selected else 'nvidia-smi lists no GPU')
    replay_change = None
    if _s(settings, 'boot_persist'):
        files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
        if decided['replay'] is None:
            want = {'path': config, 'state': 'absent'}
        else:
            want = {'path': config, 'state': 'file', 'sha1': _plan.sha1_text(gs.replay_text(decided['replay']))}
        replay_change = path_change(files.get(config), want)
        if replay_change:
            for check in managed or [POWER]:
                level = 'fail' if check == CLOCKS and _locks_wanted(settings) else 'warn'
                _drift(plan, check, 'the replay file ' + replay_change + ' (what the boot unit re-applies)', True,
                       level)
    if (_s(settings, 'apply') and decided['planned']) or replay_change:
        plan['args']['nvidia_gpu'] = module_args(settings, wanted, context, selected, decided, smi, daemon)
    return decided


def plan(facts, settings, context):
    plan_ = _plan.new_plan(ROLE)
    wanted = check_settings(plan_, settings)
    if wanted is None:
        return plan_
    words = expected_words(settings, wanted)
    for check, text in zip(CHECKS, words):
        _plan.set_check(plan_, check, text, 'left as the driver set it' if text.startswith('not managed') else '',
                        text if text.startswith('not managed') else None)
    managed = _managed(words)
    if _s(settings, 'boot_persist'):
        boot_files(plan_, facts, settings, context, managed or [POWER])
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    host = context.get('host') or ''
    pending = context.get('driver_pending')
    if not nvidia.get('present') and context.get('check_mode') and pending is not None:
        # Check mode on a fresh node: the driver is installed in this run, so no GPU can be read yet; once loaded it
        # has every setting at its default (one rule: fresh_driver_changes).
        changes = gs.fresh_driver_changes(wanted, bool((pending or {}).get('persistenced')))
        plan_['reports'].append('Check mode on {0}: the NVIDIA driver is installed in this run, so the GPUs cannot '
                                'be read yet; the settings are predicted from the driver\'s defaults.'.format(host))
        if changes and (_s(settings, 'apply') or _s(settings, 'boot_persist')):
            for change in changes:
                _drift(plan_, POWER if change.startswith(('power', 'persistence')) else CLOCKS, change)
            plan_['args']['nvidia_gpu'] = module_args(settings, wanted, context, pending=pending or {})
        return plan_
    if not nvidia.get('present'):
        why = nvidia.get('error') or 'ansible_facts.nvidia.present is false'
        if _s(settings, 'require_gpu'):
            text = '{0}require_gpu is true but ansible_facts.nvidia.present is false on {1} ({2}).'.format(
                PREFIX, host, why)
            plan_['errors'].append(text)
            # The role fails on the node: its checks fail with the same words (not only warn on the boot files).
            for check in managed or [POWER]:
                _drift(plan_, check, text, fixable=False)
        else:
            plan_['reports'].append('Skipping gpu_settings on {0}: no working NVIDIA driver/GPU ({1}). Set {2}'
                                    'require_gpu=true to make this an error.'.format(host, why, PREFIX))
        for check in managed:
            _plan.set_check(plan_, check, plan_['checks'][check]['expected'], '', 'nvidia-smi lists no GPU')
        return plan_
    if nvidia.get('partial') or nvidia.get('error'):
        msg = 'nvidia-smi printed {0} of {1} attached GPUs ({2}); only the printed GPUs are {3}'.format(
            len(nvidia.get('gpus') or []), nvidia.get('attached_gpus'), nvidia.get('error') or 'partial output',
            'managed and checked')
        for check in managed:
            _drift(plan_, check, msg, fixable=False)
    if not (_s(settings, 'apply') or _s(settings, 'boot_persist')):
        return plan_
    plan_gpus(plan_, facts, settings, context, wanted, managed)
    units = facts.get('nodeprep_units') if isinstance(facts.get('nodeprep_units'), dict) else {}
    unit = units.get(UNIT) or {}
    if _s(settings, 'boot_persist') and unit.get('active') == 'failed':
        msg = '{0} failed at its last run (journalctl -u {0}); a run of the role applies the settings now'.format(UNIT)
        for check in managed:
            _drift(plan_, check, msg, fixable=False, level='fail' if check == CLOCKS else 'warn')
    return plan_
