# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The performance tools of the simulated fleet: ``all_reduce_perf`` (NVIDIA/nccl-tests) and ``nvbandwidth``
(NVIDIA/nvbandwidth), printing the real layouts with the figures of the node's profile (``perf`` in
profiles/*.json; sources in REALITY.md next to this file, "Performance tools").

The binaries the perf_tools role builds in a node are the stand-in toolchain's output (tests/testbed/packages): a
script that runs ``gpu-double all_reduce_perf --nccl-tests-version <v> -- <arguments>`` (or ``nvbandwidth
--version-tag <v>``).  Layouts: nccl-tests ``src/util.cu`` at tag v2.17.9 (``writeDeviceReport``,
``writeResultHeader``, ``writeBenchmarkLineBody`` with ``getFloatStr``, ``writeResultFooter``); nvbandwidth v0.8
``output.cpp`` and ``inline_common.h`` (the matrix, ``SUM``), ``json_output.cpp`` (``-j``).

What the faults change: ``allreduce-slow`` multiplies the all-reduce bus bandwidth by its factor (default 0.5);
``nvlink-inactive`` scales the all-reduce by the active share of the worst GPU's links and the device-to-device
cells of that GPU by its own share (arithmetic: NVLink bandwidth is per link; a guess at how real runs degrade);
``pcie-downtrained`` scales that GPU's host<->device cells by width and generation (PCIe bandwidth is per lane and
per generation); a lost or removed GPU is not a CUDA device.
"""
from __future__ import absolute_import, division, print_function

import os
import socket
import sys
import zlib

import gpudouble as gd
from dcgmi_double import styled

NVB_VERSION_DEFAULT = 'v0.8'
NCCL_TESTS_VERSION_DEFAULT = '2.17.9'
LATENCY_US = 25.0  # small-message time of one all-reduce (guess: the captures show 20-125 us at 8 bytes)
SIZE_SUFFIX = {'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3, 'T': 1024 ** 4}
NCCL_LIB_DIRS = ('usr/lib/x86_64-linux-gnu', 'usr/lib64', 'usr/lib', 'lib64', 'lib/x86_64-linux-gnu')
CUDA_VERSION_OF_BRANCH = {'570': 12080, '575': 12090, '580': 13000, '590': 13010, '595': 13020}


def _devices(profile, state):
    """The GPUs CUDA sees (present and reachable) and why none, if so."""
    drv = state.get('driver') or {}
    if not drv.get('loaded') or gd.fault_active(gd.FAULT_DRIVER_UNLOADED):
        return None, 'CUDA driver version is insufficient for CUDA runtime version'
    if not drv.get('gpus_initialized'):
        return None, 'no CUDA-capable device is detected'
    lost = gd.lost_gpus(profile)
    gpus = [g for g in gd.present_gpus(profile) if g['pci_bus_id'] not in lost]
    if not gpus:
        return None, 'no CUDA-capable device is detected'
    return gpus, None


def _jitter(*keys):
    """A stable spread of +-0.4 % per cell, as real matrices show (370.26-372.96 GB/s in the H100 capture)."""
    seed = zlib.crc32(repr(keys).encode('utf-8')) % 1000
    return 1.0 + (seed - 500) / 125000.0


def nvlink_share(profile, bus):
    total = int(profile.get('nvlinks') or 0)
    down = len(gd.nvlink_inactive(profile).get(bus, ()))
    return 1.0 if not total else max(0.0, (total - down) / float(total))


def pcie_share(profile, bus):
    link = gd.pcie_downtrained(profile).get(bus)
    if not link:
        return 1.0
    full = profile['pcie']
    share = link['width'] / float(full['width_max'])
    if link['gen']:
        share *= 2.0 ** (link['gen'] - full['gen_max'])
    return min(1.0, share)


def library_found(name):
    """Whether the dynamic loader would find a shared library (the standard directories, LD_LIBRARY_PATH)."""
    dirs = [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d]
    dirs += [gd.path(d) for d in NCCL_LIB_DIRS]
    return any(os.path.exists(os.path.join(d, name)) for d in dirs)


# ---------------------------------------------------------------- all_reduce_perf

def parse_size(text):
    text = text.strip()
    mult = SIZE_SUFFIX.get(text[-1:].upper(), 1) if text[-1:].isalpha() else 1
    return int(float(text[:-1] if text[-1:].isalpha() else text) * mult)


def float_str(value, width):
    """nccl-tests' getFloatStr: 2, 1 or 0 decimals as the value grows, scientific beyond."""
    power = 0
    val = 1
    while value >= val:
        power += 1
        val *= 10
    if power < width - 2:
        return '{0:{1}.2f}'.format(value, width)
    if power < width - 1:
        return '{0:{1}.1f}'.format(value, width)
    if power < width + 1:
        return '{0:{1}.0f}'.format(value, width)
    return '{0:{1}.1e}'.format(value, width)


def allreduce_args(argv):
    """(options, error) of all_reduce_perf's command line (the options the gate uses)."""
    opts = {'b': 32 * 1024 ** 2, 'e': 32 * 1024 ** 2, 'f': 1, 'i': 1024 ** 2, 'g': 1, 't': 1, 'n': 20, 'w': 1,
            'm': 1, 'c': 1, 'd': 'float', 'o': 'sum'}
    longs = {'--minbytes': 'b', '--maxbytes': 'e', '--stepfactor': 'f', '--stepbytes': 'i', '--ngpus': 'g',
             '--nthreads': 't', '--iters': 'n', '--warmup_iters': 'w', '--agg_iters': 'm', '--check': 'c',
             '--datatype': 'd', '--op': 'o'}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key = longs.get(arg) or (arg[1:] if len(arg) == 2 and arg.startswith('-') else None)
        if key not in opts or i + 1 >= len(argv):
            return None, 'invalid option -- {0!r}'.format(arg.lstrip('-'))
        value = argv[i + 1]
        try:
            opts[key] = parse_size(value) if key in ('b', 'e', 'i') else (value if key in ('d', 'o') else int(value))
        except ValueError:
            return None, 'invalid value {0!r} for {1}'.format(value, arg)
        i += 2
    return opts, None


def all_reduce_perf(argv, nccl_tests_version=NCCL_TESTS_VERSION_DEFAULT, nccl_code=0, program='all_reduce_perf'):
    """(stdout, stderr, rc) of all_reduce_perf with argv."""
    if not library_found('libnccl.so.2'):
        return '', ('{0}: error while loading shared libraries: libnccl.so.2: cannot open shared object file: No '
                    'such file or directory\n'.format(program)), 127
    opts, error = allreduce_args(argv)
    if error:
        return '', '{0}: {1}\nUSAGE: {0} [-t nthreads] [-g ngpus] [-b minbytes] [-e maxbytes] [-f stepfactor] ' \
                   '[-n iters] [-w warmup_iters] [-c check] [-d datatype] [-o op]\n'.format(program, error), 1
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    gpus, why = _devices(profile, state)
    if gpus is None:
        return '', 'Cuda failure common.cu: \'{0}\'\n'.format(why), 1
    ranks = opts['g'] * opts['t']
    if ranks > len(gpus):
        return '', ('Invalid number of GPUs: {0} requested but only {1} were found.\n'
                    'Please check the number of processes and GPUs per process.\n'.format(ranks, len(gpus))), 1
    used = gpus[:ranks]
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0
    peak_bus = profile['perf']['allreduce_busbw_gbps'] * min(nvlink_share(profile, g['pci_bus_id']) for g in used)
    peak_bus *= gd.allreduce_factor() or 1.0
    elem = 4 if opts['d'] in ('float', 'int32', 'uint32') else (8 if opts['d'] in ('double', 'int64') else 2)
    host = socket.gethostname()
    pid = os.getpid()
    out = ['# nccl-tests version {0} nccl-headers={1} nccl-library={1}'.format(nccl_tests_version, nccl_code),
           '# Collective test starting: {0}'.format(program),
           '# nThread {0} nGpus {1} minBytes {2} maxBytes {3} step: {4}({5}) warmup iters: {6} iters: {7} agg iters: '
           '{8} validation: {9} graph: 0'.format(opts['t'], opts['g'], opts['b'], opts['e'],
                                                 opts['f'] if opts['f'] > 1 else opts['i'],
                                                 'factor' if opts['f'] > 1 else 'bytes', opts['w'], opts['n'],
                                                 opts['m'], 1 if opts['c'] else 0),
           '#', '# Using devices']
    for rank, gpu in enumerate(used):
        domain, bus, dev = gpu['pci_bus_id'].split(':')[0], gpu['pci_bus_id'].split(':')[1], \
            gpu['pci_bus_id'].split(':')[2].split('.')[0]
        out.append('#  Rank {0:2d} Group {1:2d} Pid {2:6d} on {3:>10} device {4:2d} [{5:04x}:{6:02x}:{7:02x}] {8}'.format(
            rank, 0, pid, host, gpu['index'], int(domain, 16), int(bus, 16), int(dev, 16), profile['product_name']))
    out += ['#',
            '# {0:>10}  {1:>12}  {2:>8}  {3:>6}  {4:>6}           out-of-place                       in-place          '
            .format('', '', '', '', ''),
            '# {0:>10}  {1:>12}  {2:>8}  {3:>6}  {4:>6}  {5:>7}  {6:>6}  {7:>6}  {8:>6}  {9:>7}  {10:>6}  {11:>6}  '
            '{12:>6} '.format('size', 'count', 'type', 'redop', 'root', 'time', 'algbw', 'busbw', '#wrong', 'time',
                              'algbw', 'busbw', '#wrong'),
            '# {0:>10}  {1:>12}  {2:>8}  {3:>6}  {4:>6}  {5:>7}  {6:>6}  {7:>6}  {8:>6}  {9:>7}  {10:>6}  {11:>6}  '
            '{12:>6} '.format('(B)', '(elements)', '', '', '', '(us)', '(GB/s)', '(GB/s)', '', '(us)', '(GB/s)',
                              '(GB/s)', '')]
    sizes = []
    size = opts['b']
    while size <= opts['e'] and len(sizes) < 64:
        sizes.append(size - size % (elem * ranks) if size >= elem * ranks else size)
        size = size * opts['f'] if opts['f'] > 1 else size + opts['i']
    buses = []
    for size in sizes:
        cols = ['{0:12d}  {1:12d}  {2:>8}  {3:>6}  {4:>6}'.format(size, size // elem, opts['d'], opts['o'], -1)]
        for place in ('out', 'in'):
            alg_peak = peak_bus / factor if factor else peak_bus
            time_us = LATENCY_US + (size / (alg_peak * 1e3) if alg_peak else 0.0)
            time_us *= _jitter(size, place)
            algbw = size / time_us / 1e3
            busbw = algbw * factor
            wrong = '{0:6g}'.format(0) if opts['c'] else '   N/A'
            cols.append('  {0}  {1}  {2}  {3}'.format(float_str(time_us, 7), float_str(algbw, 6),
                                                      float_str(busbw, 6), wrong))
            # src/common.cu adds the busBw of every printed half (out-of-place and in-place) to the average.
            buses.append(busbw)
        out.append(''.join(cols))
    avg = sum(buses) / len(buses) if buses else 0.0
    out += ['# {0:<20} : {1} {2}'.format('Out of bounds values', 0, 'OK'),
            '# {0:<20} : {1:g} '.format('Avg bus bandwidth', avg),
            '#', '# Collective test concluded: {0}'.format(program), '']
    if gd.reset_volatile(state, profile):
        gd.save_state(state)
    return '\n'.join(out), '', 0


# ---------------------------------------------------------------- nvbandwidth

NVB_TESTS = {
    'host_to_device_memcpy_ce': ('h2d', 'memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)'),
    'device_to_host_memcpy_ce': ('d2h', 'memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)'),
    'device_to_device_memcpy_read_ce': ('d2d', 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)'),
    'device_to_device_memcpy_write_ce': ('d2d', 'memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)'),
    'host_to_device_memcpy_sm': ('h2d', 'memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)'),
    'device_to_host_memcpy_sm': ('d2h', 'memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)'),
    'device_to_device_memcpy_read_sm': ('d2d', 'memcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)'),
    'device_to_device_memcpy_write_sm': ('d2d', 'memcpy SM GPU(row) <- GPU(column) bandwidth (GB/s)'),
}
NVB_ORDER = ('host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce',
             'device_to_device_memcpy_write_ce', 'host_to_device_memcpy_sm', 'device_to_host_memcpy_sm',
             'device_to_device_memcpy_read_sm', 'device_to_device_memcpy_write_sm')


def nvb_matrix(profile, gpus, kind):
    """(rows, columns, values) of one test: host rows x GPU columns, or GPU x GPU with N/A on the diagonal."""
    perf = profile['perf']
    if kind in ('h2d', 'd2h'):
        figure = perf['h2d_gbps' if kind == 'h2d' else 'd2h_gbps']
        return [[figure * pcie_share(profile, g['pci_bus_id']) * _jitter(kind, g['index']) for g in gpus]]
    rows = []
    for a in gpus:
        row = []
        for b in gpus:
            if a is b:
                row.append(None)
                continue
            share = min(nvlink_share(profile, a['pci_bus_id']), nvlink_share(profile, b['pci_bus_id']))
            row.append(perf['d2d_read_gbps'] * share * _jitter(kind, a['index'], b['index']))
        rows.append(row)
    return rows


def nvb_text_matrix(values):
    width = 2
    out = [' ' * width + ''.join('{0:>10}'.format(n) for n in range(len(values[0])))]
    for n, row in enumerate(values):
        cells = ''.join('{0:>10}'.format('N/A' if v is None else '{0:.2f}'.format(v)) for v in row)
        out.append('{0:>{1}}'.format(n, width) + cells)
    return out


def nvbandwidth(argv, version_tag=NVB_VERSION_DEFAULT, git_version=None):
    """(stdout, stderr, rc) of nvbandwidth with argv (-t/--testcase, -j/--json, -l/--list, -h, -i/-b/-v).
    ``git_version``: what ``git describe`` gave the build (CMakeLists.txt); a build from a release tarball has no git
    and prints it empty.  None: the version tag (a build from a clone at the tag)."""
    git = version_tag if git_version is None else git_version
    tests, as_json, listing = [], False, False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ('-t', '--testcase'):
            i += 1
            while i < len(argv) and not argv[i].startswith('-'):
                tests.append(argv[i])
                i += 1
            continue
        if arg in ('-j', '--json'):
            as_json = True
        elif arg in ('-l', '--list'):
            listing = True
        elif arg in ('-i', '--testSamples', '-b', '--bufferSize'):
            i += 1
        elif arg in ('-v', '--verbose', '-s', '--skipVerification', '-d', '--disableAffinity', '-m', '--useMean'):
            pass
        else:
            return ('nvbandwidth Version: {0}\nBuilt from Git version: {2}\n\nERROR: Invalid Arguments \n{1} \n'
                    .format(version_tag, ' '.join(['nvbandwidth'] + argv), git)), '', 1
        i += 1
    head = ['nvbandwidth Version: {0}'.format(version_tag), 'Built from Git version: {0}'.format(git), '']
    if listing:
        return '\n'.join(head + ['Index, Name:', '\tDescription', '======================='] +
                         ['{0}, {1}:\n{2}\n'.format(n, name, NVB_TESTS[name][1]) for n, name in enumerate(NVB_ORDER)]
                         ) + '\n', '', 0
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    gpus, why = _devices(profile, state)
    if gpus is None:
        return '\n'.join(head) + '\n', '[CUDA_ERROR_NO_DEVICE] {0} in function main\n'.format(why), 1
    driver = state['driver']['version']
    cuda = CUDA_VERSION_OF_BRANCH.get(driver.split('.')[0], 13000)
    host = socket.gethostname()
    cases = []
    for name in tests or list(NVB_ORDER):
        if name not in NVB_TESTS:
            cases.append({'name': name, 'status': 'ERROR', 'error': 'Testcase {0} not found!'.format(name)})
            continue
        kind, description = NVB_TESTS[name]
        if kind == 'd2d' and len(gpus) < 2:
            cases.append({'name': name, 'status': 'Waived'})
            continue
        cases.append({'name': name, 'status': 'Passed', 'description': description,
                      'matrix': nvb_matrix(profile, gpus, kind)})
    if gd.reset_volatile(state, profile):
        gd.save_state(state)
    if as_json:
        body = {'version': version_tag, 'git_version': git, 'CUDA Runtime Version': cuda,
                'Driver Version': driver, 'GPU Device list': [
                    '{0}: {1} ({2}): ({3})'.format(n, profile['product_name'], g['pci_bus_id'][:-2].lower(), host)
                    for n, g in enumerate(gpus)], 'testcases': []}
        for case in cases:
            entry = {'name': case['name'], 'status': case['status']}
            if case['status'] == 'Passed':
                entry['bandwidth_description'] = case['description'] + ' '
                entry['bandwidth_matrix'] = [['N/A' if v is None else '{0:g}'.format(round(v, 4)) for v in row]
                                             for row in case['matrix']]
                entry['sum'] = sum(v for row in case['matrix'] for v in row if v is not None)
            if case.get('error'):
                entry['error'] = case['error']
            body['testcases'].append(entry)
        # json_output.cpp prints m_root.toStyledString() and std::endl: jsoncpp's StyledWriter, a blank line
        return styled({'nvbandwidth': body}) + '\n\n', '', 0
    out = head + ['CUDA Runtime Version: {0}'.format(cuda), 'CUDA Driver Version: {0}'.format(cuda),
                  'Driver Version: {0}'.format(driver), '', host]
    for n, gpu in enumerate(gpus):
        out.append('Device {0}: {1} ({2})'.format(n, profile['product_name'], gpu['pci_bus_id'][:-2].lower()))
    out.append('')
    for case in cases:
        if case['status'] == 'Waived':
            out.append('Waived: ')
            continue
        if case['status'] == 'ERROR':
            out.append('ERROR: {0}'.format(case['error']))
            continue
        out.append('Running {0}.'.format(case['name']))
        out.append(case['description'])
        out += nvb_text_matrix(case['matrix'])
        out.append('')
        out.append('SUM {0} {1:.2f}'.format(case['name'], sum(v for row in case['matrix'] for v in row if v)))
        out.append('')
    out += ['NOTE: The reported results may not reflect the full capabilities of the platform.',
            'Performance can vary with software drivers, hardware clocks, and system topology.', '']
    return '\n'.join(out) + '\n', '', 0


def _main(func, argv, **kw):
    try:
        out, err, rc = func(argv, **kw)
    except gd.DoubleError as exc:
        sys.stderr.write('gpu-double: {0}\n'.format(exc))
        return 255
    sys.stderr.write(err)
    sys.stdout.write(out)
    sys.stdout.flush()
    return rc


def cmd_all_reduce_perf(args):
    """``gpu-double all_reduce_perf [--nccl-tests-version V] [--nccl-code N] [--program NAME] -- ARGS``."""
    kw = {}
    while args and args[0] != '--':
        if args[0] in ('--nccl-tests-version', '--nccl-code', '--program') and len(args) > 1:
            key = {'--nccl-tests-version': 'nccl_tests_version', '--nccl-code': 'nccl_code',
                   '--program': 'program'}[args[0]]
            kw[key] = int(args[1]) if key == 'nccl_code' else args[1]
            args = args[2:]
            continue
        break
    if args[:1] == ['--']:
        args = args[1:]
    return _main(all_reduce_perf, args, **kw)


def cmd_nvbandwidth(args):
    """``gpu-double nvbandwidth [--version-tag vX] [--git-version G] -- ARGS``."""
    kw = {}
    while args[:1] in (['--version-tag'], ['--git-version']) and len(args) > 1:
        kw['version_tag' if args[0] == '--version-tag' else 'git_version'] = args[1]
        args = args[2:]
    if args[:1] == ['--']:
        args = args[1:]
    return _main(nvbandwidth, args, **kw)
