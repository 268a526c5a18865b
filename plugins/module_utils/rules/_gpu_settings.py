# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# The GPU settings rules, in one place (pure functions, no Ansible import):
#
# * select_gpus()        which GPUs "all" / an nvidia-smi index / a UUID / a PCI bus id names;
# * parse_power_limit()  and power_limit_watts(): "700", "700W", 700 or "70%" of the default limit -> watts,
#                        with ONE rounding rule (round_watts) and ONE tolerance (POWER_TOLERANCE_W);
# * parse_clock_range()  / parse_app_clocks(): the clock settings;
# * plan_gpu()           the nvidia-smi commands (argv lists) that take one GPU from its current state to the wanted
#                        one, and boot_commands(), the commands that take it there from a fresh boot (the replay file
#                        the boot unit runs verbatim).
#
# Callers: the nvidia_gpu module and the gpu_settings role's plan (plans/_plan_gpu_settings.py, which the readiness
# checks gpu.power_limit and gpu.clocks read). The boot script does not import this file: it replays what
# nvidia_gpu wrote.
#
# Python 3.6 compatible (EL8 platform-python).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import math
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import normalize_bus_id

# Python 3 only (3.6 and later), like the rest of module_utils.
integer_types = (int,)
string_types = (str,)

# A power limit resolves to whole watts, half up (50% of 1001 W is 501 W) ...
# ... and a GPU whose limit is within this many watts of the target counts as set.
POWER_TOLERANCE_W = 0.5
# Version of the replay file format (see boot_replay()).
REPLAY_VERSION = 1

_DIGITS_RE = re.compile(r'^[0-9]+$')
_NUMBER_RE = re.compile(r'^[0-9]+(?:\.[0-9]+)?$')

POWER_LIMIT_FORMS = 'watts (e.g. 700) or a percentage of the default limit (e.g. "70%")'


class GpuSettingsError(Exception):
    """A setting is malformed, or cannot be applied to a GPU; the message names the host, GPU, value and range."""

    def __init__(self, msg):
        super(GpuSettingsError, self).__init__(msg)
        self.msg = msg


def _on(host):
    return ' on {0}'.format(host) if host else ''


def gpu_label(gpu):
    return 'GPU {0} ({1})'.format(gpu.get('index'), gpu.get('pci_bus_id'))


def fmt_watts(value):
    return '?' if value is None else '{0:.2f}'.format(value)


# -- GPU selection --------------------------------------------------------------------------------------------------

def _present(gpus):
    return ', '.join('{0} ({1}, {2})'.format(g.get('index'), g.get('pci_bus_id'), g.get('uuid')) for g in gpus)


def indexes_ambiguous(nvidia):
    """True when nvidia-smi reports more attached GPUs than it printed (a lost GPU): positions are not indexes."""
    gpus = nvidia.get('gpus') or []
    attached = nvidia.get('attached_gpus')
    return isinstance(attached, integer_types) and attached > len(gpus)


def selection(wanted, name='gpus'):
    """Check the form of a GPU selection: None for all GPUs, else the list of entries as text.

    Raises GpuSettingsError when ``wanted`` is neither "all" nor a non-empty list (the form only; which GPUs exist is
    select_gpus' business).
    """
    if wanted is None or (isinstance(wanted, string_types) and wanted.strip().lower() == 'all'):
        return None
    if isinstance(wanted, string_types) or not isinstance(wanted, (list, tuple)):
        raise GpuSettingsError('{0}: {1!r} is not "all" or a list of GPU indexes, UUIDs or PCI bus ids'.format(
            name, wanted))
    if not wanted:
        raise GpuSettingsError('{0} is empty; give "all" or at least one GPU index, UUID or PCI bus id'.format(name))
    texts = [str(item).strip() for item in wanted]
    if any(t.lower() == 'all' for t in texts):
        if len(texts) > 1:
            raise GpuSettingsError('{0}: "all" cannot be combined with other entries, got {1}'.format(
                name, list(wanted)))
        return None
    return texts


def select_gpus(nvidia, wanted, host=None, name='gpus'):
    """The GPUs of ``nvidia`` (the ``ansible_facts.nvidia`` dict) that ``wanted`` names, in nvidia-smi order.

    ``wanted``: ``"all"`` (or ``None``/``["all"]``) or a list of nvidia-smi indexes, UUIDs and PCI bus ids in any
    common spelling. An index is nvidia-smi's index. nvidia-smi keeps the indexes of the other GPUs when one is lost,
    so when it reports more attached GPUs than it printed, the position in its output is not the index: indexes are
    refused then, naming the bus ids to use. Raises GpuSettingsError for anything that matches nothing.
    """
    gpus = list(nvidia.get('gpus') or [])
    texts = selection(wanted, name)
    if texts is None:
        return gpus
    ambiguous = indexes_ambiguous(nvidia)
    selected = []
    for item, text in zip(wanted, texts):
        match = None
        if _DIGITS_RE.match(text):
            if ambiguous:
                raise GpuSettingsError(
                    '{0}: index {1} is ambiguous{2}: nvidia-smi reports {3} attached GPUs but printed {4} (a GPU is '
                    'lost, and nvidia-smi keeps the indexes of the others); name the GPUs by PCI bus id instead: '
                    '{5}'.format(name, text, _on(host), nvidia.get('attached_gpus'), len(gpus),
                                 ', '.join(g.get('pci_bus_id') or '?' for g in gpus) or 'none printed'))
            number = int(text)
            match = next((g for g in gpus if g.get('index') == number), None)
        else:
            lowered = text.lower()
            match = next((g for g in gpus if str(g.get('uuid') or '').lower() == lowered), None)
            bus_id = normalize_bus_id(text)
            if match is None and bus_id is not None:
                match = next((g for g in gpus if normalize_bus_id(g.get('pci_bus_id')) == bus_id), None)
        if match is None:
            raise GpuSettingsError('{0}: no GPU matches {1!r}{2}; GPUs present: {3}'.format(
                name, item, _on(host), _present(gpus) or 'none'))
        if not any(match is s for s in selected):
            selected.append(match)
    return [g for g in gpus if any(g is s for s in selected)]


_UUID_RE = re.compile(r'^(GPU|MIG)-[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}$')
SELECTION_FORMS = '"all", or a list of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids (00000000:8F:00.0)'


def selection_problem(wanted):
    """Why ``wanted`` (a GPU selection as the role's typed list) is not "all" or a list of indexes, UUIDs and PCI
    bus ids; None when it is.  Stricter than selection(): the role's variable must say "all" in lower case, and
    every entry must have one of the three forms (so ``ALL`` or ``GPU0`` is refused before any GPU is read)."""
    if wanted == 'all' or wanted == ['all']:
        return None
    if not isinstance(wanted, (list, tuple)) or not wanted:
        return 'expected ' + SELECTION_FORMS
    bad = [item for item in wanted if isinstance(item, bool) or not (
        _DIGITS_RE.match(str(item).strip()) or _UUID_RE.match(str(item).strip())
        or normalize_bus_id(str(item)) is not None)]
    if bad:
        return '{0} {1} not a GPU index, UUID or PCI bus id; expected {2}'.format(
            ', '.join(json.dumps(item) if isinstance(item, string_types) else repr(item) for item in bad),
            'is' if len(bad) == 1 else 'are', SELECTION_FORMS)
    return None


def find_by_bus_id(gpus, bus_id):
    wanted = normalize_bus_id(bus_id)
    return next((g for g in gpus if normalize_bus_id(g.get('pci_bus_id')) == wanted), None)


# -- power limit ----------------------------------------------------------------------------------------------------

def parse_power_limit(value, name='power_limit'):
    """``700``, ``700.5``, ``"700"``, ``"700W"`` -> ('watts', 700.0); ``"70%"`` -> ('percent', 70.0).

    Refuses booleans, NaN, infinities, zero, negative numbers and anything else.
    """
    what = '{0} must be {1}, got {2!r}'.format(name, POWER_LIMIT_FORMS, value)
    if isinstance(value, bool):
        raise GpuSettingsError(what)
    if isinstance(value, integer_types) or isinstance(value, float):
        kind, number = 'watts', float(value)
    elif isinstance(value, string_types):
        text = value.strip()
        kind = 'watts'
        if text.endswith('%'):
            kind, text = 'percent', text[:-1].strip()
        elif text[-1:] in ('W', 'w'):
            text = text[:-1].strip()
        if not _NUMBER_RE.match(text):
            raise GpuSettingsError(what)
        number = float(text)
    else:
        raise GpuSettingsError(what)
    if math.isnan(number) or math.isinf(number) or number <= 0:
        raise GpuSettingsError(what)
    return kind, number


def round_watts(value):
    """The one rounding rule: whole watts, half up."""
    return float(math.floor(value + 0.5))


def power_limit_matches(current, target):
    """The one tolerance: a limit within POWER_TOLERANCE_W of the target counts as set."""
    return current is not None and target is not None and abs(current - target) < POWER_TOLERANCE_W


def describe_power_limit(request):
    kind, number = request
    return '{0:g}%'.format(number) if kind == 'percent' else '{0:g} W'.format(number)


def power_limit_watts(request, gpu, clamp=False, host=None, name='power_limit'):
    """Watts to set on ``gpu`` for ``request`` (from parse_power_limit): ``(watts, warning)``.

    Raises GpuSettingsError naming the host, the GPU, the value and the allowed range when the value is outside the
    GPU's min..max and ``clamp`` is false (with ``clamp``, the warning says where it was clamped to).
    """
    kind, number = request
    label = gpu_label(gpu) + _on(host)
    low, high = gpu.get('min_power_limit_w'), gpu.get('max_power_limit_w')
    if kind == 'percent':
        default = gpu.get('default_power_limit_w')
        if default is None:
            raise GpuSettingsError('{0}: {1} {2:g}% needs the default power limit, which nvidia-smi reports as '
                                   'N/A'.format(label, name, number))
        watts = round_watts(default * number / 100.0)
        shown = '{0:g}% of the default {1} W = {2:g} W'.format(number, fmt_watts(default), watts)
    else:
        watts = round_watts(number)
        shown = '{0:g} W'.format(number) if watts == number else '{0:g} W (rounded to {1:g} W)'.format(number, watts)
    if low is None or high is None:
        raise GpuSettingsError('{0}: the power limit range is not reported (N/A) by nvidia-smi, so {1} cannot be '
                               'managed'.format(label, name))
    if low <= watts <= high:
        return watts, None
    text = '{0}: {1} {2} is outside the allowed range {3}-{4} W'.format(label, name, shown, fmt_watts(low),
                                                                        fmt_watts(high))
    if not clamp:
        raise GpuSettingsError(text)
    watts = low if watts < low else high
    return watts, '{0}; clamped to {1} W'.format(text, fmt_watts(watts))


def watts_arg(watts):
    """The -pl argument for a value from power_limit_watts (whole watts, or the min/max nvidia-smi printed)."""
    if watts == int(watts):
        return str(int(watts))
    return '{0:.2f}'.format(watts)


# -- clocks ---------------------------------------------------------------------------------------------------------

def _as_mhz(value, what):
    if isinstance(value, bool):
        raise GpuSettingsError('{0} must be an integer number of MHz, got {1!r}'.format(what, value))
    if isinstance(value, integer_types):
        return value
    if isinstance(value, float) and not math.isinf(value) and not math.isnan(value) and value == int(value):
        return int(value)
    if isinstance(value, string_types) and _DIGITS_RE.match(value.strip()):
        return int(value.strip())
    raise GpuSettingsError('{0} must be an integer number of MHz, got {1!r}'.format(what, value))


def is_reset(value):
    return isinstance(value, string_types) and value.strip().lower() == 'reset'


def parse_clock_range(value, name):
    """``reset`` -> None; ``{min, max}`` -> {'min_mhz', 'max_mhz'}."""
    if is_reset(value):
        return None
    if not isinstance(value, dict) or set(value.keys()) != set(('min', 'max')):
        raise GpuSettingsError('{0} must be "reset" or a dict with the keys min and max (MHz), got {1!r}'.format(
            name, value))
    low = _as_mhz(value['min'], '{0}.min'.format(name))
    high = _as_mhz(value['max'], '{0}.max'.format(name))
    if low < 1 or low > high:
        raise GpuSettingsError('{0}: min ({1}) must be at least 1 and not above max ({2})'.format(name, low, high))
    return {'min_mhz': low, 'max_mhz': high}


def parse_app_clocks(value, name='applications_clocks'):
    """``reset`` -> 'reset'; ``{memory, graphics}`` -> {'graphics_mhz', 'mem_mhz'}."""
    if is_reset(value):
        return 'reset'
    if not isinstance(value, dict) or set(value.keys()) != set(('memory', 'graphics')):
        raise GpuSettingsError('{0} must be "reset" or a dict with the keys memory and graphics (MHz), got '
                               '{1!r}'.format(name, value))
    return {'graphics_mhz': _as_mhz(value['graphics'], name + '.graphics'),
            'mem_mhz': _as_mhz(value['memory'], name + '.memory')}


def lock_bounds(gpu):
    """Supported (low, high) MHz for the graphics and the memory lock: {'locked_gpu_clocks': (lo, hi), ...}.

    The low bound comes from the supported clocks table; when nvidia-smi printed a malformed entry in it
    (``supported_clocks_incomplete``), the table cannot bound anything from below and only the max clocks count.
    """
    supported = gpu.get('supported_clocks') or {}
    incomplete = bool(gpu.get('supported_clocks_incomplete'))
    graphics = [c for clocks in supported.values() for c in clocks]
    top = gpu.get('max_clocks') or {}
    return {
        'locked_gpu_clocks': (None if incomplete or not graphics else min(graphics), top.get('graphics_mhz')),
        'locked_memory_clocks': (None if incomplete or not supported else min(int(m) for m in supported),
                                 top.get('mem_mhz')),
    }


def check_clock_range(gpu, name, value, host=None):
    if value is None:
        return
    low, high = lock_bounds(gpu)[name]
    if (low is not None and value['min_mhz'] < low) or (high is not None and value['max_mhz'] > high):
        if low is None:
            allowed = 'up to {0} MHz'.format(high)
        elif high is None:
            allowed = 'from {0} MHz'.format(low)
        else:
            allowed = '{0}-{1} MHz'.format(low, high)
        raise GpuSettingsError('{0}{1}: {2} {3}-{4} MHz is outside the supported range {5}'.format(
            gpu_label(gpu), _on(host), name, value['min_mhz'], value['max_mhz'], allowed))


def app_clocks_target(gpu, request, host=None):
    """The applications clocks ``request`` sets on ``gpu``: ``(target, warning)``; GpuSettingsError if refused."""
    label = gpu_label(gpu) + _on(host)
    if gpu.get('applications_clocks_deprecated'):
        raise GpuSettingsError(
            '{0}: the driver reports applications clocks as deprecated ("Requested functionality has been '
            'deprecated"); use locked_gpu_clocks and locked_memory_clocks (nvidia-smi -lgc/-lmc) '
            'instead'.format(label))
    if gpu.get('applications_clocks') is None:
        raise GpuSettingsError('{0}: applications clocks are not supported on this GPU (nvidia-smi reports '
                               'N/A)'.format(label))
    if request == 'reset':
        if gpu.get('default_applications_clocks') is None:
            raise GpuSettingsError('{0}: default applications clocks are not reported (N/A), cannot reset '
                                   'them'.format(label))
        return dict(gpu['default_applications_clocks']), None
    supported = gpu.get('supported_clocks') or {}
    mem_key = str(request['mem_mhz'])
    if mem_key not in supported or request['graphics_mhz'] not in supported[mem_key]:
        if gpu.get('supported_clocks_incomplete'):
            return request, ('{0}: nvidia-smi printed a supported memory clock without a value, so applications_clocks '
                             '{1},{2} MHz cannot be checked here; nvidia-smi will check it'.format(
                                 label, request['mem_mhz'], request['graphics_mhz']))
    if mem_key not in supported:
        raise GpuSettingsError('{0}: applications_clocks memory {1} MHz is not supported; supported memory '
                               'clocks: {2}'.format(label, request['mem_mhz'], ', '.join(
                                   sorted(supported, key=int, reverse=True)) or 'none reported'))
    if request['graphics_mhz'] not in supported[mem_key]:
        raise GpuSettingsError('{0}: applications_clocks graphics {1} MHz is not supported with memory {2} MHz; '
                               'supported graphics clocks: {3}'.format(
                                   label, request['graphics_mhz'], request['mem_mhz'],
                                   ', '.join(str(c) for c in supported[mem_key])))
    return request, None


# -- settings as a whole --------------------------------------------------------------------------------------------

LOCKS = (('locked_gpu_clocks', '-lgc', '-rgc'), ('locked_memory_clocks', '-lmc', '-rmc'))
# The lock record nvidia_gpu keeps in its state_dir (and the boot unit writes).
LOCK_RECORD = 'nvidia_gpu_locks.json'
# The current clock each lock holds (a key of the ``clocks`` facts).
LOCK_CLOCKS = {'locked_gpu_clocks': 'graphics_mhz', 'locked_memory_clocks': 'mem_mhz'}
# clocks_event_reasons that are no cap: the GPU is idle, or runs at its applications clocks / lock.
NOT_A_CAP = ('gpu_idle', 'applications_clocks_setting')


def lock_holding(gpu, setting, value):
    """Whether the lock ``value`` (a range from parse_clock_range) that the record says is applied this boot shows
    in the GPU's current clocks: ``(True, None)``; ``(False, caps)`` when the current clock is outside the range,
    with the clocks_event_reasons that are active and hold it down (empty: nothing explains it, the lock is gone,
    as after a driver reload); ``(None, None)`` when the clock is not reported."""
    current = (gpu.get('clocks') or {}).get(LOCK_CLOCKS[setting])
    if current is None or not isinstance(value, dict):
        return None, None
    if value['min_mhz'] <= current <= value['max_mhz']:
        return True, None
    reasons = gpu.get('clocks_event_reasons') or {}
    return False, sorted(name for name, active in reasons.items() if active and name not in NOT_A_CAP)


VOLATILE = ('power_limit', 'locked_gpu_clocks', 'locked_memory_clocks', 'applications_clocks')


def parse_settings(params, prefix=''):
    """Parse the raw settings (module options, or role variables with ``prefix``) into ``wanted``.

    Keys of the result: only the settings given (``persistence_mode`` bool, ``power_limit`` (kind, number),
    ``locked_gpu_clocks``/``locked_memory_clocks`` range or None for reset, ``applications_clocks``).
    """
    wanted = {}
    value = params.get(prefix + 'persistence_mode')
    if value is not None:
        if not isinstance(value, bool):
            raise GpuSettingsError('{0}persistence_mode must be true, false or null, got {1!r}'.format(prefix, value))
        wanted['persistence_mode'] = value
    value = params.get(prefix + 'power_limit')
    if value is not None:
        wanted['power_limit'] = parse_power_limit(value, prefix + 'power_limit')
    for name, dummy, dummy2 in LOCKS:
        value = params.get(prefix + name)
        if value is not None:
            wanted[name] = parse_clock_range(value, prefix + name)
    value = params.get(prefix + 'applications_clocks')
    if value is not None:
        wanted['applications_clocks'] = parse_app_clocks(value, prefix + 'applications_clocks')
    return wanted


def plan_gpu(gpu, wanted, argv, locks, daemon, clamp=False, host=None):
    """Plan one GPU: ``{before, after, commands, readback, warnings, locks}``.

    ``argv(gpu, *args)`` builds an nvidia-smi command. ``locks`` maps ``locked_gpu_clocks``/``locked_memory_clocks``
    to what is known to be applied this boot (a range, None for unlocked) or is missing when unknown: a reset is
    planned unless the GPU is known to be unlocked, and current clocks are never taken as proof of a lock.
    ``daemon``: nvidia-persistenced runs (then -pm is never planned).
    """
    before, after, commands, readback, warnings = {}, {}, [], {}, []
    label = gpu_label(gpu) + _on(host)
    if 'persistence_mode' in wanted:
        desired = wanted['persistence_mode']
        before['persistence_mode'] = gpu.get('persistence_mode')
        if daemon:
            after['persistence_mode'] = gpu.get('persistence_mode')
            if gpu.get('persistence_mode') != desired:
                warnings.append('{0}: nvidia-persistenced is running and manages persistence mode; the GPU reports '
                                '{1}, not changing it with nvidia-smi -pm (configure the daemon instead)'.format(
                                    label, 'enabled' if gpu.get('persistence_mode') else 'disabled'))
        else:
            after['persistence_mode'] = desired
            if gpu.get('persistence_mode') != desired:
                commands.append(argv(gpu, '-pm', '1' if desired else '0'))
                readback['persistence_mode'] = desired
    if 'power_limit' in wanted:
        desired, warning = power_limit_watts(wanted['power_limit'], gpu, clamp, host)
        if warning:
            warnings.append(warning)
        current = gpu.get('power_limit_w')
        if current is None:
            raise GpuSettingsError('{0}: the power limit is not reported (N/A) by nvidia-smi, so it cannot be '
                                   'managed'.format(label))
        before['power_limit_w'] = current
        after['power_limit_w'] = desired
        if not power_limit_matches(current, desired):
            commands.append(argv(gpu, '-pl', watts_arg(desired)))
            readback['power_limit_w'] = desired
    if 'applications_clocks' in wanted:
        desired, warning = app_clocks_target(gpu, wanted['applications_clocks'], host)
        if warning:
            warnings.append(warning)
        before['applications_clocks'] = gpu.get('applications_clocks')
        after['applications_clocks'] = desired
        if gpu.get('applications_clocks') != desired:
            if wanted['applications_clocks'] == 'reset':
                commands.append(argv(gpu, '-rac'))
            else:
                commands.append(argv(gpu, '-ac', '{0},{1}'.format(desired['mem_mhz'], desired['graphics_mhz'])))
            readback['applications_clocks'] = desired
    for setting, lock_flag, reset_flag in LOCKS:
        if setting not in wanted:
            continue
        desired = wanted[setting]
        check_clock_range(gpu, setting, desired, host)
        known = setting in locks
        before[setting] = locks.get(setting) if known else 'unknown'
        after[setting] = desired
        if not known or locks[setting] != desired:
            if desired is None:
                commands.append(argv(gpu, reset_flag))
            else:
                commands.append(argv(gpu, lock_flag, '{0},{1}'.format(desired['min_mhz'], desired['max_mhz'])))
    return {'before': before, 'after': after, 'commands': commands, 'readback': readback, 'warnings': warnings}


def volatile_without_persistence(gpu, wanted, daemon, host=None):
    """A sentence when settings that the driver drops on unload would be set while nothing keeps it loaded."""
    if daemon:
        return None
    asked = [name for name in VOLATILE if wanted.get(name) is not None]
    if not asked:
        return None
    persistence = wanted.get('persistence_mode', gpu.get('persistence_mode'))
    if persistence:
        return None
    return ('{0}: {1} would be lost as soon as the last nvidia-smi client exits: persistence mode is {2} and '
            'nvidia-persistenced is not running; enable nvidia-persistenced (the nvidia_driver role does) or set '
            'persistence_mode: true'.format(gpu_label(gpu) + _on(host), ' and '.join(asked),
                                            'to be disabled' if 'persistence_mode' in wanted else 'disabled'))


def boot_commands(gpu, result, argv, daemon):
    """Commands that take ``gpu`` from a fresh boot to ``result['after']`` (from plan_gpu): the replay entries.

    After a boot the driver has dropped every volatile setting (power limit back to default, clocks unlocked,
    applications clocks at default), so: -pm 1 only when nvidia-persistenced does not run, then -pl, -lgc, -lmc and
    -ac for what is set to a value; resets need nothing.
    """
    after = result['after']
    commands = []
    if after.get('persistence_mode') and not daemon:
        commands.append(argv(gpu, '-pm', '1'))
    if after.get('power_limit_w') is not None and not power_limit_matches(gpu.get('default_power_limit_w'),
                                                                          after['power_limit_w']):
        commands.append(argv(gpu, '-pl', watts_arg(after['power_limit_w'])))
    for setting, lock_flag, dummy in LOCKS:
        value = after.get(setting)
        if isinstance(value, dict):
            commands.append(argv(gpu, lock_flag, '{0},{1}'.format(value['min_mhz'], value['max_mhz'])))
    app = after.get('applications_clocks')
    if isinstance(app, dict) and app != gpu.get('default_applications_clocks'):
        commands.append(argv(gpu, '-ac', '{0},{1}'.format(app['mem_mhz'], app['graphics_mhz'])))
    return commands


def fresh_driver_changes(wanted, daemon):
    """What nvidia_gpu would change on GPUs that a driver installed in this run has just loaded.

    Check mode on a fresh node cannot read the GPUs (the driver is installed in the same run), but a freshly loaded
    driver has every setting at its default: persistence mode off (nvidia-persistenced, when ``daemon``, then
    manages it), the power limit at the default limit, clocks unlocked, applications clocks at their defaults.
    ``wanted`` comes from parse_settings.  Returns one sentence per setting that differs from those defaults (so
    plan_gpu would plan a command or boot_replay would write a replay entry for it); an empty list when nothing would
    change.  A power limit in watts and applications clocks are counted as changes because their defaults are only
    known once the driver runs; a clock lock, even ``reset``, because plan_gpu resets clocks it has no record of.
    """
    changes = []
    if wanted.get('persistence_mode') and not daemon:
        changes.append('persistence mode is disabled when the driver loads and nvidia-persistenced will not run: '
                       '-pm 1')
    request = wanted.get('power_limit')
    if request is not None and not (request[0] == 'percent' and request[1] == 100.0):
        changes.append('power limit {0}: the driver starts at the default limit{1}'.format(
            describe_power_limit(request), '' if request[0] == 'percent' else ', which is unknown until it loads'))
    for setting, lock_flag, reset_flag in LOCKS:
        if setting not in wanted:
            continue
        if wanted[setting] is None:
            changes.append('{0} reset: no record of this boot says the clocks are unlocked ({1})'.format(
                setting, reset_flag))
        else:
            changes.append('{0} {1}-{2} MHz: the driver starts with the clocks unlocked'.format(
                setting, wanted[setting]['min_mhz'], wanted[setting]['max_mhz']))
    if isinstance(wanted.get('applications_clocks'), dict):
        changes.append('applications clocks {0},{1} MHz: the defaults are unknown until the driver loads'.format(
            wanted['applications_clocks']['mem_mhz'], wanted['applications_clocks']['graphics_mhz']))
    return changes


def boot_replay(entries, record_path):
    """The replay file: ``entries`` is a list of (gpu, result, commands) from plan_gpu/boot_commands.

    ``commands`` run in order at boot; ``locks`` is what the boot unit records in ``record_path`` (the record
    nvidia_gpu reads) once every command succeeded, so that a later run knows the clocks are locked this boot.
    Returns None when there is nothing to replay.
    """
    commands, locks = [], {}
    for gpu, result, replay in entries:
        commands.extend(replay)
        entry = {}
        for setting, dummy, dummy2 in LOCKS:
            if setting in result['after']:
                entry[setting] = result['after'][setting]
        if entry:
            entry['uuid'] = gpu.get('uuid')
            locks[gpu['pci_bus_id']] = entry
    if not commands and not locks:
        return None
    return {'version': REPLAY_VERSION, 'commands': commands, 'record_path': record_path, 'locks': locks}


# -- the whole decision, shared by nvidia_gpu (on the node) and the gpu_settings role (on the controller) -------------

def replay_text(replay):
    """The replay file's exact text (what nvidia_gpu writes, what the role's plan compares by SHA-1)."""
    return json.dumps(replay, indent=2, sort_keys=True) + '\n'


def known_locks(record, boot, gpu):
    """{setting: value} that the lock record ``record`` (its parsed JSON) knows for ``gpu`` this boot (``boot`` is
    the boot id); a GPU or setting missing, a record of another boot or of another GPU at that bus id: unknown."""
    if not isinstance(record, dict) or record.get('boot_id') != boot or not isinstance(record.get('gpus'), dict):
        return {}
    entry = record['gpus'].get(gpu['pci_bus_id'])
    if not isinstance(entry, dict) or entry.get('uuid') != gpu.get('uuid'):
        return {}
    return dict((name, entry[name]) for name, dummy, dummy2 in LOCKS if name in entry)


def held_down_locks(record, boot, gpu):
    """{setting: caps} of the locks the record says are applied this boot whose clock runs outside the lock with a
    power or thermal cap active (``caps``, the clocks_event_reasons that hold it down): a cap set out of band wins
    over the lock, and no run of gpu_settings changes it.  A lock the clocks do not show with nothing holding them
    down stays known: nvidia-smi does not report the locked range itself, so nothing here proves it gone."""
    held = {}
    for setting, value in known_locks(record, boot, gpu).items():
        holding, caps = lock_holding(gpu, setting, value)
        if holding is False and caps:
            held[setting] = caps
    return held


def unsupported_app_clocks(selected):
    """Labels of the GPUs whose driver reports applications clocks as deprecated or not supported."""
    return [gpu_label(g) for g in selected
            if g.get('applications_clocks_deprecated') or g.get('applications_clocks') is None]


def plan_settings(state, wanted, gpus, locks_of, daemon, argv, clamp=False, host=None, skip_unsupported_app=False,
                  record_path=None):
    """Everything nvidia_gpu decides before acting, from the parsed ``nvidia-smi -q -x`` ``state``.

    ``wanted`` from parse_settings (an unsupported applications clocks request is dropped from a copy when
    ``skip_unsupported_app``); ``gpus`` the selection; ``locks_of(gpu)`` what is known locked this boot;
    ``record_path`` the lock record the replay names (None: no replay).  Returns {selected, wanted, plans, replay,
    planned, warnings}; raises GpuSettingsError like plan_gpu.
    """
    wanted = dict(wanted)
    selected = select_gpus(state, gpus, host)
    warnings = []
    if 'applications_clocks' in wanted and skip_unsupported_app:
        unsupported = unsupported_app_clocks(selected)
        if unsupported:
            warnings.append('applications_clocks are left alone{0}: the driver reports them as deprecated or not '
                            'supported on {1}; use locked_gpu_clocks and locked_memory_clocks '
                            'instead'.format(_on(host), ', '.join(unsupported)))
            del wanted['applications_clocks']
    plans, planned, entries = [], [], []
    for gpu in selected:
        plan = plan_gpu(gpu, wanted, argv, locks_of(gpu), daemon, clamp, host)
        problem = volatile_without_persistence(gpu, wanted, daemon, host)
        if problem:
            raise GpuSettingsError(problem)
        plans.append(plan)
        planned.extend(plan['commands'])
        entries.append((gpu, plan, boot_commands(gpu, plan, argv, daemon)))
    replay = boot_replay(entries, record_path) if record_path else None
    return {'selected': selected, 'wanted': wanted, 'plans': plans, 'replay': replay, 'planned': planned,
            'warnings': warnings}
