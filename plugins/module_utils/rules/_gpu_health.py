# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""GPU health that slows or breaks a job, judged on the controller from one gather (issue #28): clock event reasons
(gpu.throttle), the PCIe link (pci.link), NVLinks and their error counters (nvlink.links), remapped rows
(gpu.remapped_rows), MIG mode (gpu.mig) and VBIOS versions (gpu.vbios).

Each check is a pure function ``(facts, settings) -> (status, expected, observed)`` of the gathered facts
(``facts['nvidia']``: the parsed ``nvidia-smi -q -x``; ``facts['nvidia']['nvlink']``: the raw outputs of ``nvidia-smi
nvlink -s`` and ``-e``, parsed here with parsers/_nvlink.py) and the readiness settings
(``nodeprep_readiness_thresholds``: overrides of rules/_fitness_thresholds.py, ``nodeprep_readiness_mig``).  Every
figure and rule comes from rules/_fitness_thresholds.py, where its public source is named; a failure names the GPU
(index and bus id), the link or figure, and the threshold with its unit.  No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvlink
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds as ft

# (bandit: 'pass' is a check status, not a password)
PASS = 'pass'  # nosec B105
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'

THRESHOLDS = 'nodeprep_readiness_thresholds'
MIG = 'nodeprep_readiness_mig'
MIG_CHOICES = ('disabled', 'enabled', 'any')

# nvidia-smi's words for the clock event reasons (the XML tags without their prefix).
REASON_WORDS = {
    'hw_slowdown': 'HW Slowdown',
    'hw_thermal_slowdown': 'HW Thermal Slowdown',
    'hw_power_brake_slowdown': 'HW Power Brake Slowdown',
    'sw_thermal_slowdown': 'SW Thermal Slowdown',
    'sw_power_cap': 'SW Power Cap',
    'gpu_idle': 'Idle',
    'applications_clocks_setting': 'Applications Clocks Setting',
    'sync_boost': 'Sync Boost',
    'display_clocks_setting': 'Display Clock Setting',
}


def _gpus(facts):
    nvidia = facts.get('nvidia') if isinstance(facts, dict) else None
    gpus = nvidia.get('gpus') if isinstance(nvidia, dict) else None
    return gpus if isinstance(gpus, list) else []


def label(gpu):
    """``GPU 3 (00000000:97:00.0)``: the index and bus id nvidia-smi prints."""
    return 'GPU {0} ({1})'.format(gpu.get('index'), gpu.get('pci_bus_id'))


def overrides(settings):
    """The threshold overrides of the readiness settings (``{}`` when none)."""
    value = (settings or {}).get(THRESHOLDS)
    return value if isinstance(value, dict) else {}


def settings_problems(settings):
    """Sentences naming what is wrong with the settings of these checks; [] when they can be used."""
    problems = []
    value = (settings or {}).get(THRESHOLDS)
    if value is not None and not isinstance(value, dict):
        problems.append('{0}={1!r}: expected a dict of threshold -> number'.format(THRESHOLDS, value))
    else:
        try:
            ft.thresholds(None, value or {})
        except ft.ThresholdError as exc:
            problems.append('{0}.{1}'.format(THRESHOLDS, exc))
    mig = (settings or {}).get(MIG)
    if mig is not None and mig not in MIG_CHOICES:
        problems.append('{0}={1!r}: allowed: {2}'.format(MIG, mig, ', '.join(MIG_CHOICES)))
    return problems


_LIMITS_CACHE = {}


def _limits(gpu, settings):
    """thresholds() of the GPU's model with the site's overrides; the same few models on every host of a run, so
    the answers are kept (a copy of the overrides is the key; the table is read-only)."""
    given = overrides(settings)
    try:
        key = (gpu.get('name'), tuple(sorted(given.items())))
        hash(key)
    except TypeError:
        return ft.thresholds(gpu.get('name'), given)
    found = _LIMITS_CACHE.get(key)
    if found is None:
        if len(_LIMITS_CACHE) > 256:
            _LIMITS_CACHE.clear()
        found = _LIMITS_CACHE[key] = ft.thresholds(gpu.get('name'), given)
    return found


def _source_words(entry):
    """``(source: <key>)`` of one thresholds() entry."""
    return entry.get('source_key') or 'none'


def _no_gpu():
    return 'nvidia-smi lists no GPU'


def _count(n, word):
    return '{0} {1}{2}'.format(n, word, '' if n == 1 else 's')


# ---------------------------------------------------------------------------------------------------------------------
# gpu.throttle


def throttle(facts, settings):
    """gpu.throttle: no clock event reason that holds the clocks down for a fault is Active on any GPU.

    ``CLOCK_REASONS`` (rules/_fitness_thresholds.py; sources nvidia-smi-help, azure-nhc): HW Slowdown, HW Thermal
    Slowdown and HW Power Brake Slowdown cut the clocks by a factor of 2 or more; SW Thermal Slowdown lowers them below
    the requested clocks because the GPU is above its maximum operating temperature: all fail.  SW Power Cap (the power
    limit, a setting), Idle, Applications Clocks Setting, Sync Boost and Display Clock Setting are settings or rest:
    they pass.  The reasons are a reading of this moment, not a history."""
    failing = sorted(name for name, verdict in ft.CLOCK_REASONS.items() if verdict == FAIL)
    expected = 'no GPU with {0} Active (clock event reasons; SW Power Cap, Idle and the clock settings are ' \
               'not faults)'.format(', '.join(REASON_WORDS[name] for name in failing))
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    problems, warnings, unread = [], [], []
    for gpu in gpus:
        reasons = gpu.get('clocks_event_reasons')
        if not isinstance(reasons, dict):
            unread.append(label(gpu))
            continue
        for kind, verdict in ((FAIL, problems), (WARN, warnings)):
            active = [name for name in sorted(reasons) if reasons[name] and ft.CLOCK_REASONS.get(name) == kind]
            if active:
                clocks = gpu.get('clocks') or {}
                most = gpu.get('max_clocks') or {}
                text = '{0}: {1} Active'.format(label(gpu), ', '.join(REASON_WORDS.get(n, n) for n in active))
                if clocks.get('graphics_mhz') is not None and most.get('graphics_mhz'):
                    text += ' (graphics clock {0} of {1} MHz)'.format(clocks['graphics_mhz'], most['graphics_mhz'])
                verdict.append(text)
    if unread and len(unread) == len(gpus):
        return SKIP, expected, 'nvidia-smi reports no clock event reasons (driver too old) on {0}'.format(
            _count(len(gpus), 'GPU'))
    if unread:
        warnings.append('no clock event reasons reported for {0}'.format(', '.join(unread)))
    if problems:
        return FAIL, expected, '; '.join(problems + warnings)
    if warnings:
        return WARN, expected, '; '.join(warnings)
    return PASS, expected, 'no clock slowdown on {0}'.format(_count(len(gpus), 'GPU'))


# ---------------------------------------------------------------------------------------------------------------------
# pci.link


def _idle(gpu):
    reasons = gpu.get('clocks_event_reasons')
    return isinstance(reasons, dict) and bool(reasons.get('gpu_idle'))


def pcie_link(facts, settings):
    """pci.link: every GPU's PCIe link at its full width; a lower generation only where the GPU is idle.

    ``PCIE_IDLE_RULE`` (sources nvidia-smi-help: the current generation and width "may be reduced when the GPU is not
    in use"; captures: idle data-centre GPUs keep their width and may drop their generation; oci-hpc: x16 on every
    GPU).  On a board of the model table (HGX, GB200/GB300 trays) the width wanted is the larger of the link's maximum
    and the model's (``pcie_width``): below it fails.  A GPU model outside the table (PCIe cards: cloud slots wired x8
    below an x16 maximum are common, captures of T4, A10G, L40S) only warns, unless the site sets
    ``nodeprep_readiness_thresholds.pcie_width`` (then below it fails, on every model).  A generation below the link's
    maximum passes on an idle GPU (power saving) and warns on a busy one (the host<->device bandwidth gate judges it
    under load)."""
    expected = 'every GPU at its full PCIe width (x16 on HGX boards); a lower generation only while idle'
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    problems, warnings, notes, unread, seen = [], [], [], [], []
    for gpu in gpus:
        link = gpu.get('pcie')
        if not isinstance(link, dict) or link.get('width_current') is None:
            unread.append(label(gpu))
            continue
        limits = _limits(gpu, settings)
        width = limits['pcie_width']
        current, gen, gen_max = link['width_current'], link.get('gen_current'), link.get('gen_max')
        seen.append('x{0} Gen{1}'.format(current, gen))
        if width['source_key'] == 'setting':
            want, source, found = width['value'], 'nodeprep_readiness_thresholds.pcie_width', problems
        elif limits['model']['value']:
            want = max(v for v in (link.get('width_max'), width['value'], 1) if v)
            source = 'model {0}, source {1}'.format(limits['model']['value'], width['source_key']) \
                if width['value'] and want == width['value'] else 'the link maximum'
            found = problems
        else:
            want, source, found = link.get('width_max'), 'the link maximum; a slot wired narrower? set ' \
                'nodeprep_readiness_thresholds.pcie_width', warnings
        if want and current < want:
            found.append('{0}: PCIe link x{1} (Gen{2}), below x{3} lanes ({4})'.format(
                label(gpu), current, gen, want, source))
        elif gen and gen_max and gen < gen_max:
            if _idle(gpu):
                notes.append('{0} at Gen{1} of Gen{2} while idle (power saving)'.format(label(gpu), gen, gen_max))
            else:
                warnings.append('{0}: PCIe Gen{1}, below its Gen{2} maximum while not idle (x{3}; the host<->device '
                                'bandwidth gate judges it under load)'.format(label(gpu), gen, gen_max, current))
    if unread and len(unread) == len(gpus):
        return SKIP, expected, 'nvidia-smi reports no PCIe link on {0}'.format(_count(len(gpus), 'GPU'))
    if unread:
        problems.append('no PCIe link reported for {0}'.format(', '.join(unread)))
    if problems:
        return FAIL, expected, '; '.join(problems + warnings)
    if warnings:
        return WARN, expected, '; '.join(warnings)
    distinct = sorted(set(seen))
    observed = 'all {0} at {1}'.format(_count(len(seen), 'GPU'), distinct[0]) if len(distinct) == 1 else \
        '{0}: {1}'.format(_count(len(seen), 'GPU'), ', '.join(distinct))
    if notes:
        observed += '; ' + '; '.join(notes)
    return PASS, expected, observed


# ---------------------------------------------------------------------------------------------------------------------
# nvlink.links


def _command_text(read, what):
    """(text, error) of one raw command read ``{rc, stdout, stderr}`` of the gather."""
    if not isinstance(read, dict):
        return None, 'nvidia-smi nvlink {0} was not read'.format(what)
    if read.get('error'):
        return None, read['error']
    if read.get('rc') not in (0, None):
        said = ' '.join(part.strip() for part in (read.get('stdout'), read.get('stderr')) if part and part.strip())
        return None, 'nvidia-smi nvlink {0} exited with rc {1}: {2}'.format(what, read.get('rc'), said or 'no output')
    return read.get('stdout') or '', None


def _by_index(parsed):
    return dict((gpu['index'], gpu) for gpu in parsed['gpus'])


def _counter_kind(name):
    lowered = name.lower()
    for kind in ('replay', 'recovery', 'crc'):
        if kind in lowered:
            return kind
    return 'other'


def _error_limits(gpu, settings):
    limits = _limits(gpu, settings)
    out = {}
    for kind in ('replay', 'recovery', 'crc'):
        entry = limits['nvlink_{0}_errors_max'.format(kind)]
        out[kind] = (entry['value'], 'nodeprep_readiness_thresholds.nvlink_{0}_errors_max'.format(kind)
                     if entry['source_key'] == 'setting' else entry['source_key'])
    return out


def nvlink_read(facts):
    """The gather's ``nvidia.nvlink`` (``{status: {rc, stdout, stderr}, errors: {...}}``) or None."""
    nvidia = facts.get('nvidia') if isinstance(facts, dict) else None
    read = nvidia.get('nvlink') if isinstance(nvidia, dict) else None
    return read if isinstance(read, dict) else None


def nvlinks(facts, settings):
    """nvlink.links: every GPU of a board with NVLink lists the board's number of NVLinks (the model table's
    ``nvlinks``, or ``nodeprep_readiness_thresholds.nvlinks``), each active at the lowest speed an active link may
    print or more (``nvlink_gbps``); its error counters since the driver loaded stay within
    ``nvlink_replay_errors_max``, ``nvlink_recovery_errors_max`` (0: DCGM's health watch fails any growth) and
    ``nvlink_crc_errors_max`` (none by default: DCGM judges CRC errors by their rate, which one read cannot give; a
    count above 0 warns)."""
    expected = 'the board\'s NVLinks active on every GPU, at their speed; NVLink error counters within the thresholds'
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    read = nvlink_read(facts)
    if read is None:
        return SKIP, expected, 'nvidia-smi nvlink was not read'
    status_text, status_error = _command_text(read.get('status'), '-s')
    errors_text, errors_error = _command_text(read.get('errors'), '-e')
    problems, warnings, judged, good = [], [], 0, 0
    status = errors = None
    try:
        status = _by_index(_nvlink.parse_nvlink_status(status_text)) if status_error is None else None
    except _nvlink.NvlinkParseError as exc:
        status_error = 'cannot parse nvidia-smi nvlink -s: {0}'.format(exc)
    try:
        errors = _by_index(_nvlink.parse_nvlink_errors(errors_text)) if errors_error is None else None
    except _nvlink.NvlinkParseError as exc:
        errors_error = 'cannot parse nvidia-smi nvlink -e: {0}'.format(exc)
    for gpu in gpus:
        limits = _limits(gpu, settings)
        want, speed = limits['nvlinks'], limits['nvlink_gbps']
        if not want['value']:
            continue
        judged += 1
        if status is None:
            continue
        found = status.get(gpu.get('index'))
        source = 'nodeprep_readiness_thresholds.nvlinks' if want['source_key'] == 'setting' else want['source_key']
        if found is None or (not found['links'] and not found['all_inactive']):
            problems.append('{0}: no NVLink listed, {1} wanted ({2})'.format(label(gpu), want['value'], source))
            continue
        if found['all_inactive']:
            problems.append('{0}: all NVLinks inactive, {1} wanted ({2})'.format(label(gpu), want['value'], source))
            continue
        down = [link['link'] for link in found['links'] if not link['active']]
        slow = [link for link in found['links'] if link['active'] and speed['value']
                and link['speed_gbps'] < speed['value']]
        bad = []
        if found['active'] < want['value']:
            # Links listed beyond the board's count may be inactive by design (an NVLink bridge uses 12 of 18).
            if down:
                bad.append('link{0} {1} inactive'.format('s' if len(down) > 1 else '',
                                                         ', '.join(str(n) for n in down)))
            bad.append('{0} of {1} links active ({2})'.format(found['active'], want['value'], source))
        if slow:
            bad.append('{0} below {1:g} GB/s per link ({2})'.format(
                ', '.join('link {0} at {1:g} GB/s'.format(link['link'], link['speed_gbps']) for link in slow),
                speed['value'], 'nodeprep_readiness_thresholds.nvlink_gbps' if speed['source_key'] == 'setting'
                else speed['source_key']))
        if bad:
            problems.append('{0}: {1}'.format(label(gpu), '; '.join(bad)))
        else:
            good += 1
    if judged and status_error:
        problems.append(status_error)
    counted = 0
    if errors is not None:
        for gpu in gpus:
            found = errors.get(gpu.get('index'))
            if found is None:
                continue
            counted += 1
            limits = _error_limits(gpu, settings)
            for link in sorted(found['links']):
                for name, value in sorted(found['links'][link].items()):
                    if not value:
                        continue
                    kind = _counter_kind(name)
                    most, source = limits.get(kind, (None, None))
                    text = '{0} link {1}: {2} {3}'.format(label(gpu), link, value, name)
                    if most is not None and value > most:
                        problems.append('{0}, above {1} ({2}; counted since the driver loaded)'.format(
                            text, most, source))
                    elif most is None:
                        warnings.append('{0} since the driver loaded (no threshold: {1})'.format(
                            text, 'DCGM judges CRC errors per second' if kind == 'crc' else 'a counter of NVLink 5'))
    elif judged and errors_error:
        warnings.append(errors_error)
    if problems:
        return FAIL, expected, '; '.join(problems + warnings)
    if not judged and not counted:
        return SKIP, expected, 'no NVLink count known for {0} (nodeprep_readiness_thresholds.nvlinks)'.format(
            ', '.join(sorted(set(str(g.get('name')) for g in gpus))))
    observed = []
    if judged:
        names = sorted(set(str(g.get('name')) for g in gpus))
        wants = sorted(set(_limits(g, settings)['nvlinks']['value'] for g in gpus) - set([None]))
        observed.append('{0} of {1} GPUs with all {2} NVLinks active ({3})'.format(
            good, judged, ' or '.join(str(n) for n in wants), ', '.join(names)))
    if counted:
        observed.append('error counters within the thresholds on {0}'.format(_count(counted, 'GPU')))
    if warnings:
        return WARN, expected, '; '.join(observed + warnings)
    return PASS, expected, '; '.join(observed)


# ---------------------------------------------------------------------------------------------------------------------
# gpu.remapped_rows


def remapped_rows(facts, settings):
    """gpu.remapped_rows: no GPU with a row remap pending (a GPU reset applies it) or a remapping failure (replace the
    GPU), and at most ``remapped_rows_uncorrectable_max`` rows remapped for uncorrectable errors (``REMAPPED_ROWS``;
    sources nvidia-mem-error-mgmt, azure-nhc, oci-hpc, dcgm-health).  GPUs older than Ampere have no row remapping."""
    expected = 'no row remapping pending or failed on any GPU; uncorrectable remapped rows within the threshold'
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    problems, counted = [], 0
    for gpu in gpus:
        rows = gpu.get('remapped_rows')
        if not isinstance(rows, dict):
            continue
        counted += 1
        if rows.get('pending'):
            problems.append('{0}: row remapping pending (reset the GPU or reboot to apply it)'.format(label(gpu)))
        if rows.get('failure'):
            problems.append('{0}: row remapping failed (replace the GPU)'.format(label(gpu)))
        most = _limits(gpu, settings)['remapped_rows_uncorrectable_max']
        if rows.get('uncorrectable') and most['value'] is not None and rows['uncorrectable'] > most['value']:
            problems.append('{0}: {1} rows remapped for uncorrectable errors, above {2} rows ({3})'.format(
                label(gpu), rows['uncorrectable'], most['value'],
                'nodeprep_readiness_thresholds.remapped_rows_uncorrectable_max' if most['source_key'] == 'setting'
                else most['source_key']))
    if problems:
        return FAIL, expected, '; '.join(problems)
    if not counted:
        return SKIP, expected, 'no row remapping on these GPUs (before Ampere)'
    total = sum((g.get('remapped_rows') or {}).get('uncorrectable') or 0 for g in gpus)
    return PASS, expected, 'none pending or failed on {0}; {1} uncorrectable remapped'.format(
        _count(counted, 'GPU'), _count(total, 'row'))


# ---------------------------------------------------------------------------------------------------------------------
# gpu.mig


def mig(facts, settings):
    """gpu.mig: MIG mode, current and pending, as ``nodeprep_readiness_mig`` wants it: ``disabled`` (the default;
    training jobs use whole GPUs), ``enabled``, or ``any`` (not judged).  A pending mode differing from the current
    one applies at the next GPU reset."""
    wanted = (settings or {}).get(MIG) or 'disabled'
    expected = 'MIG {0} (current and pending) on every GPU ({1})'.format(wanted, MIG)
    if wanted == 'any':
        return SKIP, expected, 'not judged: {0} is any'.format(MIG)
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    problems, counted = [], 0
    for gpu in gpus:
        current, pending = gpu.get('mig_mode'), gpu.get('mig_pending')
        if current is None and pending is None:
            continue
        counted += 1
        wrong = [(what, value) for what, value in (('current', current), ('pending', pending))
                 if value is not None and value.lower() != wanted]
        if wrong:
            problems.append('{0}: MIG {1}'.format(label(gpu), ', '.join(
                '{0} {1}'.format(value, what) for what, value in wrong)))
    if problems:
        return FAIL, expected, '; '.join(problems)
    if not counted:
        return SKIP, expected, 'no GPU supports MIG'
    return PASS, expected, 'MIG {0} on {1}'.format(wanted, _count(counted, 'GPU'))


# ---------------------------------------------------------------------------------------------------------------------
# gpu.vbios


def vbios(facts, settings):
    """gpu.vbios: one VBIOS version across the GPUs of a node (``VBIOS_RULE``; source azure-nhc, which fails the node;
    issue #28 asks for a warning: a mixed node runs, and the firmware update is planned work)."""
    expected = ft.VBIOS_RULE
    gpus = _gpus(facts)
    if not gpus:
        return SKIP, expected, _no_gpu()
    versions = {}
    for gpu in gpus:
        if gpu.get('vbios_version'):
            versions.setdefault(gpu['vbios_version'], []).append(gpu)
    if not versions:
        return SKIP, expected, 'nvidia-smi reports no VBIOS version'
    if len(versions) == 1:
        return PASS, expected, 'VBIOS {0} on {1}'.format(list(versions)[0], _count(len(gpus), 'GPU'))
    parts = []
    for version, found in sorted(versions.items(), key=lambda item: (-len(item[1]), item[0])):
        parts.append('{0} on {1}'.format(version, ', '.join(label(g) for g in found)))
    return WARN, expected, '{0} VBIOS versions: {1}'.format(len(versions), '; '.join(parts))
