# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""`gpu-double` commands: boot-time driver load, PCI tree, the NVIDIA daemons, modprobe and dkms shims."""
from __future__ import absolute_import, division, print_function

import fnmatch
import json
import os
import shutil
import signal
import sys
import time

import bootloader
import gpudouble as gd


def cmd_boot(args):
    """Run once per boot (gpu-double-driver.service): fresh state, driver load, PCI view, boot record."""
    profile = gd.load_profile()
    gd.write_text(os.path.join(gd.RUN_DIR, 'kernel.log'), '')
    # modules listed in modules-load.d at boot count as loaded (ib_umad for NVLSM)
    mods = set()
    for d in ('etc/modules-load.d', 'usr/lib/modules-load.d', 'run/modules-load.d'):
        full = gd.path(d)
        if os.path.isdir(full):
            for name in os.listdir(full):
                if name.endswith('.conf'):
                    for line in (gd.read_text(os.path.join(d, name), '') or '').splitlines():
                        line = line.split('#', 1)[0].strip()
                        if line:
                            mods.add(line)
    modtext = gd.read_text('etc/modules', '') or ''
    mods.update(l.split('#', 1)[0].strip() for l in modtext.splitlines() if l.split('#', 1)[0].strip())
    for mod in sorted(mods):
        if mod.replace('-', '_') == gd.PEERMEM and not gd.peer_api():
            # systemd-modules-load logs the failure; the module stays out
            gd.append_kernel_log(['nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)'])
            continue
        if mod.replace('-', '_') == gd.PEERMEM and not gd.peermem_with_ofed():
            # built without the peer-memory API: its init returns -EINVAL, and it prints nothing
            continue
        set_module(mod.replace('-', '_'), True)
    if gd.secure_boot_on():
        gd.append_kernel_log(['secureboot: Secure boot enabled',
                              'Kernel is locked down from EFI Secure Boot mode; see man kernel_lockdown.7'])
    state = gd.ensure_state(profile, at_boot=True)
    gd.save_state(state)
    gd.write_proc_driver(state)
    write_views(profile)
    bootloader.write_cmdline()
    record = {'uname_r': gd.uname_r(), 'selected_kernel': selected_kernel(), 'booted_at': time.time()}
    gd.write_text(os.path.join(gd.RUN_DIR, 'boot.json'), json.dumps(record, sort_keys=True) + '\n')
    if record['selected_kernel'] and record['selected_kernel'] != record['uname_r']:
        gd.append_kernel_log(['testbed: boot entry selects {0}; the node keeps running {1} '
                              '(kernel switch recorded, not real)'.format(record['selected_kernel'],
                                                                          record['uname_r'])])
    drv = state['driver']
    print('gpu-double: driver {0}{1}'.format(
        'loaded {0} ({1})'.format(drv['version'], drv['flavour']) if drv.get('loaded') else 'not loaded: ',
        '' if drv.get('loaded') else drv.get('reason')))
    sys.stdout.write(gd.read_text(os.path.join(gd.RUN_DIR, 'kernel.log'), ''))
    return 0


def view_dirs():
    """Where the simulated sysfs views go (tmpfs mounted by the early-boot hook; env overrides for tests)."""
    return {'pci': os.environ.get('GPU_DOUBLE_PCI_DIR', gd.path('sys/bus/pci/devices')),
            'ib': os.environ.get('GPU_DOUBLE_IB_DIR', gd.path('sys/class/infiniband')),
            'efivars': os.environ.get('GPU_DOUBLE_EFIVARS', gd.path('sys/firmware/efi/efivars'))}


def write_views(profile):
    """PCI devices, /sys/class/infiniband and the EFI variables; a view whose mount is missing is reported."""
    dirs = view_dirs()
    gd.write_rdma_views()
    for what, func in (('pci', gd.write_pci_tree), ('ib', gd.write_ib_tree), ('efivars', None)):
        try:
            if what == 'efivars':
                gd.write_efivars(dirs[what])
            else:
                func(profile, dirs[what])
        except (IOError, OSError) as exc:
            print('gpu-double: {0} view not written to {1}: {2}'.format(what, dirs[what], exc))


def cmd_views(args):
    """gpu-double views: rewrite the PCI, InfiniBand and EFI variable views (after a fault changed them)."""
    write_views(gd.load_profile())
    return 0


def selected_kernel():
    """The kernel the boot loader would start: grubby default (EL) or GRUB default/saved (Debian)."""
    env = gd.read_text('boot/grub2/grubenv') or gd.read_text('boot/grub/grubenv') or ''
    vals = dict(l.split('=', 1) for l in env.splitlines() if '=' in l and not l.startswith('#'))
    entry = vals.get('next_entry') or vals.get('saved_entry') or ''
    if entry:
        # BLS id "<machine-id>-<release>" or GRUB menu id "...gnulinux-<release>-advanced-..."
        for rel in sorted(os.listdir(gd.path('lib/modules')) if os.path.isdir(gd.path('lib/modules')) else [],
                          key=len, reverse=True):
            if entry.endswith('-' + rel) or 'gnulinux-{0}-'.format(rel) in entry or entry == rel:
                return rel
    cfg = gd.read_text('boot/grub/grub.cfg') or ''
    for line in cfg.splitlines():
        line = line.strip()
        if line.startswith('linux') and '/vmlinuz-' in line:
            return line.split('/vmlinuz-', 1)[1].split()[0]
    return None


def cmd_pcigen(args):
    """gpu-double pcigen [OUT_DIR]: (re)write the simulated PCI tree (also callable from the host
    with GPU_DOUBLE_ROOT=<node root>)."""
    out = args[0] if args else os.environ.get('GPU_DOUBLE_PCI_DIR', gd.path('sys/bus/pci/devices'))
    for name in gd.write_pci_tree(gd.load_profile(), out):
        print(name)
    return 0


def cmd_kernel_log(args):
    sys.stdout.write(gd.render_kernel_log(gd.load_profile()))
    return 0


def module_loaded(name):
    return os.path.exists(gd.path(os.path.join(gd.RUN_DIR, 'modules', name))) or \
        os.path.isdir('/sys/module/{0}'.format(name)) and gd.root() == '/'


def set_module(name, loaded):
    rel = os.path.join(gd.RUN_DIR, 'modules', name)
    if loaded:
        gd.write_text(rel, '')
    elif os.path.exists(gd.path(rel)):
        os.remove(gd.path(rel))


SIMULATED_MODULES = ('nvidia', 'nvidia_uvm', 'nvidia_modeset', 'nvidia_drm', 'nvidia_peermem', 'ib_umad', 'nouveau')


def cmd_modprobe(args):
    """modprobe shim (installed as /usr/local/sbin/modprobe): simulated modules here, others to kmod."""
    remove = '-r' in args or '--remove' in args
    dry = '-n' in args or '--dry-run' in args
    names = [a for a in args if not a.startswith('-')]
    if not names or any(n.replace('-', '_') not in SIMULATED_MODULES for n in names):
        for real in ('/usr/sbin/modprobe', '/sbin/modprobe'):
            if os.path.exists(real):
                os.execv(real, [real] + list(args))
        sys.stderr.write('modprobe: kmod not installed\n')
        return 1
    profile = gd.load_profile()
    for name in (n.replace('-', '_') for n in names):
        if dry:
            continue
        if name == 'ib_umad':
            set_module(name, not remove)
        elif name == gd.PEERMEM:
            if remove:
                set_module(name, False)
            elif not gd.ensure_state(profile)['driver'].get('loaded'):
                sys.stderr.write("modprobe: ERROR: could not insert 'nvidia_peermem': No such device\n")
                return 1
            elif not gd.peer_api():
                gd.append_kernel_log(['nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)'])
                sys.stderr.write(gd.PEERMEM_UNKNOWN_SYMBOL + '\n')
                return 1
            elif not gd.peermem_with_ofed():
                sys.stderr.write(gd.PEERMEM_EINVAL + '\n')
                return 1
            else:
                set_module(name, True)
            gd.write_rdma_views()
        elif name == 'nouveau':
            state = gd.ensure_state(profile)
            if remove:
                state['nouveau_loaded'] = False
            gd.save_state(state)
        elif name.startswith('nvidia'):
            state = gd.ensure_state(profile)
            if remove:
                state['driver'] = {'loaded': False, 'reason': 'removed with modprobe -r'}
                state['gpus'] = {}
                gd.save_state(state)
                gd.write_proc_driver(state)
            elif not state['driver'].get('loaded'):
                reason = state['driver'].get('reason') or ''
                if reason.startswith('modprobe: '):
                    sys.stderr.write(reason + '\n')
                else:
                    sys.stderr.write('modprobe: ERROR: could not insert \'nvidia\': No such device\n')
                return 1
    return 0


def cmd_modinfo(args):
    """modinfo shim (installed as /usr/local/sbin/modinfo): nvidia_peermem here, others to kmod's modinfo.

    ``modinfo -F depends nvidia_peermem``: ``ib_core,nvidia`` (built with the peer-memory API) or an empty line
    (fault peermem-no-ofed); "Module nvidia_peermem not found." (exit 1) while no nvidia.ko is installed for the
    running kernel."""
    names = [a for i, a in enumerate(args) if not a.startswith('-') and (i == 0 or args[i - 1] not in (
        '-F', '--field', '-k', '-b', '--basedir', '--set-version'))]
    if len(names) != 1 or names[0].replace('-', '_') != gd.PEERMEM:
        for real in ('/usr/sbin/modinfo', '/sbin/modinfo'):
            if os.path.exists(real):
                os.execv(real, [real] + list(args))
        sys.stderr.write('modinfo: kmod not installed\n')
        return 1
    if gd.find_module(gd.uname_r())[0] is None:
        sys.stderr.write('modinfo: ERROR: Module {0} not found.\n'.format(names[0]))
        return 1
    fields = {'depends': gd.peermem_depends(), 'license': 'Linux-OpenIB', 'description': 'NVIDIA GPU memory plug-in'}
    if '-F' in args or '--field' in args:
        flag = '-F' if '-F' in args else '--field'
        field = args[args.index(flag) + 1] if args.index(flag) + 1 < len(args) else ''
        if field in fields:
            sys.stdout.write(fields[field] + '\n')
        return 0
    for key in ('license', 'description', 'depends'):
        sys.stdout.write('{0}:{1}{2}\n'.format(key, ' ' * max(1, 16 - len(key) - 1), fields[key]))
    return 0


def cmd_detect_virt(args):
    """systemd-detect-virt shim (installed as /usr/local/sbin/systemd-detect-virt): the fleet's nodes stand for
    bare-metal servers ("none", exit 1, as systemd-detect-virt(1) says), or a VM under fault virtual-machine."""
    lines = gd.fault_lines(gd.FAULT_VIRTUAL_MACHINE)
    name = (lines[0] if lines else 'kvm') if gd.fault_active(gd.FAULT_VIRTUAL_MACHINE) else 'none'
    if '-q' not in args and '--quiet' not in args:
        sys.stdout.write(name + '\n')
    return 1 if name == 'none' else 0


# ---------------------------------------------------------------- daemons

def _run_forever(cleanup):
    def stop(signum, frame):
        cleanup()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(3600)


def _driver_or_fail(name):
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    if not state['driver'].get('loaded') or not state['driver'].get('gpus_initialized'):
        return profile, state, False
    return profile, state, True


def cmd_persistenced(args, version):
    profile, state, ok = _driver_or_fail('nvidia-persistenced')
    if not ok:
        sys.stderr.write('nvidia-persistenced failed to initialize. Check syslog for more details.\n')
        print('nvidia-persistenced: Failed to query NVIDIA devices. Please ensure that the NVIDIA '
              'device files (/dev/nvidia*) exist, and that user {0} has read and write permissions '
              'for those files.'.format(os.environ.get('USER', 'root')))
        return 1
    if state['driver']['version'] != version:
        print('nvidia-persistenced: The NVIDIA kernel module version {0} does not match the '
              'nvidia-persistenced version {1}'.format(state['driver']['version'], version))
        return 1
    # nvidia-persistenced(1): persistence mode is enabled unless --no-persistence-mode is given (Ubuntu's unit).
    enable = '--no-persistence-mode' not in args
    if enable:
        for gpu in gd.present_gpus(profile):
            gd.gpu_state(state, profile, gpu['pci_bus_id'])['persistence'] = True
    gd.save_state(state)
    gd.write_text(gd.PERSISTENCED_MARKER, '{0}\n'.format(os.getpid()))
    print('nvidia-persistenced: started (version {0}); persistence mode {1}'.format(
        version, 'enabled on {0} GPU(s)'.format(len(gd.present_gpus(profile))) if enable else 'left off'))
    sys.stdout.flush()

    def cleanup():
        st = gd.load_state() or state
        if enable:
            for gpu in st.get('gpus', {}).values():
                gpu['persistence'] = False
        gd.reset_volatile(st, profile)
        gd.save_state(st)
        marker = gd.path(gd.PERSISTENCED_MARKER)
        if os.path.exists(marker):
            os.remove(marker)
    _run_forever(cleanup)
    return 0


def _wait_for_nvlsm(seconds):
    """At boot both units start together: give nvlsm the time it needs to come up (as the real one does)."""
    marker = gd.path(os.path.join(gd.RUN_DIR, 'nvlsm.running'))
    deadline = time.time() + seconds
    while not os.path.exists(marker):
        if time.time() >= deadline:
            return False
        time.sleep(0.25)
    return True


def cmd_fabricmanager(args, version):
    profile, state, ok = _driver_or_fail('nv-fabricmanager')
    if not ok:
        print('nv-fabricmanager: failed to open NVIDIA driver: the NVIDIA kernel module is not loaded')
        return 1
    drv = state['driver']['version']
    if drv != version:
        print('nv-fabricmanager: fabric manager version {0} does not match the NVIDIA driver version {1}; '
              'both must be the same version'.format(version, drv))
        return 1
    if not gd.nvswitch_fabric(profile):
        print('nv-fabricmanager: no NVSwitch devices found, fabric manager is not needed on this system')
        return 1
    if profile.get('needs_nvlsm') and not _wait_for_nvlsm(float(os.environ.get('GPU_DOUBLE_NVLSM_WAIT', '30'))):
        print('nv-fabricmanager: NVLink subnet manager (nvlsm) is not running; start nvlsm first')
        return 1
    gd.write_text(os.path.join(gd.RUN_DIR, 'fabricmanager.running'), version + '\n')
    print('nv-fabricmanager: started, version {0}, {1} NVSwitch(es)'.format(version, gd.nvswitch_count(profile)))
    sys.stdout.flush()

    def cleanup():
        p = gd.path(os.path.join(gd.RUN_DIR, 'fabricmanager.running'))
        if os.path.exists(p):
            os.remove(p)
    _run_forever(cleanup)
    return 0


def cmd_nvlsm(args, version):
    profile = gd.load_profile()
    if not profile.get('needs_nvlsm'):
        print('nvlsm: no NVLink 5 switch ports found on this system')
        return 1
    if not module_loaded('ib_umad'):
        print("nvlsm: cannot open /dev/infiniband/umad*: kernel module ib_umad is not loaded "
              "(modprobe ib_umad)")
        return 1
    gd.write_text(os.path.join(gd.RUN_DIR, 'nvlsm.running'), version + '\n')
    print('nvlsm: started, version {0}'.format(version))
    sys.stdout.flush()

    def cleanup():
        p = gd.path(os.path.join(gd.RUN_DIR, 'nvlsm.running'))
        if os.path.exists(p):
            os.remove(p)
    _run_forever(cleanup)
    return 0


# ---------------------------------------------------------------- dkms shim

def dkms_modules():
    """[(module, version)] with sources in /usr/src/<module>-<version>/dkms.conf."""
    out = []
    src = gd.path('usr/src')
    if os.path.isdir(src):
        for name in sorted(os.listdir(src)):
            conf = os.path.join('usr/src', name, 'dkms.conf')
            text = gd.read_text(conf)
            if text is None:
                continue
            vals = dict(l.split('=', 1) for l in text.splitlines() if '=' in l)
            out.append((vals.get('PACKAGE_NAME', '').strip('"'), vals.get('PACKAGE_VERSION', '').strip('"'),
                        name, vals))
    return out


# Fault dkms-build-fails: the NVIDIA modules do not build for the kernels its lines name (fnmatch globs of `uname -r`;
# an empty flag means the fleet's ELRepo kernel-ml). Imitates R24 (NVIDIA's modules failing on kernels newer than
# the branch supports); dkms's texts, exit code and make.log path are dell/dkms dkms.in's (tests/testbed/REALITY.md).
DKMS_FAIL_FLAG = 'dkms-build-fails'
DKMS_FAIL_DEFAULT = '6.16.7-*.elrepo.*'
DKMS_VERSION = '3.2.2'


def dkms_build_fails(kernel):
    if not gd.fault_active(DKMS_FAIL_FLAG):
        return False
    globs = gd.fault_lines(DKMS_FAIL_FLAG) or [DKMS_FAIL_DEFAULT]
    return any(fnmatch.fnmatch(kernel, g) for g in globs)


def _dkms_fail(mod, ver, kernel):
    log = os.path.join('var/lib/dkms', mod, ver, 'build', 'make.log')
    gd.write_text(log, '\n'.join([
        'DKMS (dkms-{0}) make.log for {1}/{2} for kernel {3} (x86_64)'.format(DKMS_VERSION, mod, ver, kernel),
        time.strftime('%a %b %e %H:%M:%S %Z %Y'), '', 'Building module(s)',
        "# command: make -j2 KERNELRELEASE={0} modules".format(kernel),
        'testbed: the NVIDIA {0} kernel modules do not build for {1} (fault dkms-build-fails)'.format(ver, kernel),
        'make[1]: *** [Makefile:89: modules] Error 2', 'make: *** [Makefile:59: modules] Error 2', '',
        '# exit code: 2', '# elapsed: 00:00:01', '']))
    return ('Building module(s)...(bad exit status: 2)\n'
            'Error! Bad return status for module build on kernel: {0} (x86_64)\n'
            'Consult /var/lib/dkms/{1}/{2}/build/make.log for more information.'.format(kernel, mod, ver), 10)


def dkms_series():
    """The dkms the node's package gives: 3.0.11 on the Debian-family nodes (Ubuntu 24.04's), 3.2.2 on EL (EPEL's);
    tests/testbed/REALITY.md, R4 and "A stale DKMS tree"."""
    return '3.0' if os.path.exists(gd.path('var/lib/dpkg/status')) else '3.2'


def dkms_tree_combos(mods):
    """[(module, version, broken)] in the order dkms walks them (its shell globs $dkms_tree/*/*, byte order under
    LC_ALL=C): the modules with a source in /usr/src and every version tree below /var/lib/dkms; ``broken`` when the
    tree's source is gone (no /usr/src/<module>-<version>/dkms.conf: the source was removed without dkms remove)."""
    known = set((mod, ver) for mod, ver, _src, _vals in mods)
    combos = set(known)
    base = gd.path('var/lib/dkms')
    if os.path.isdir(base):
        for mod in os.listdir(base):
            mdir = os.path.join(base, mod)
            if not os.path.isdir(mdir) or os.path.islink(mdir):
                continue
            for ver in os.listdir(mdir):
                vdir = os.path.join(mdir, ver)
                if ver.startswith('kernel-') or os.path.islink(vdir) or not os.path.isdir(vdir):
                    continue
                combos.add((mod, ver))
    return [(mod, ver, (mod, ver) not in known) for mod, ver in sorted(combos)]


def _dkms_built_dirs(mod, ver):
    """The <kernel>/<arch> builds of a tree (real dkms: a module/ folder; the shim: its installed marker)."""
    base = gd.path(os.path.join('var/lib/dkms', mod, ver))
    out = []
    for kernel in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        arch = os.path.join(base, kernel, 'x86_64')
        if os.path.isdir(os.path.join(arch, 'module')) or os.path.exists(os.path.join(arch, 'installed')):
            out.append(kernel)
    return out


def _dkms_conf_error(mod, ver):
    # dkms dkms.in read_conf(): die 4 "Could not locate dkms.conf file." "File: $read_conf_file does not exist."
    return ('Error! Could not locate dkms.conf file.\nFile: /var/lib/dkms/{0}/{1}/source/dkms.conf does not '
            'exist.\n'.format(mod, ver))


def _dkms_build(mod, ver, src, vals, kernel):
    build = gd.path(os.path.join('lib/modules', kernel, 'build'))
    if os.path.islink(build) and os.readlink(build).startswith('/'):
        build = gd.path(os.readlink(build).lstrip('/'))
    if not os.path.exists(os.path.join(build, 'Makefile')):
        return 'Error! Your kernel headers for kernel {0} cannot be found at /lib/modules/{0}/build or ' \
               '/lib/modules/{0}/source.'.format(kernel)
    if dkms_build_fails(kernel):
        return _dkms_fail(mod, ver, kernel)
    # A successful build leaves no build/make.log (dkms moves it below <kernel>/<arch>/log/).
    stale = gd.path(os.path.join('var/lib/dkms', mod, ver, 'build', 'make.log'))
    if os.path.exists(stale):
        os.remove(stale)
    dest = os.path.join('lib/modules', kernel, 'updates/dkms')
    gd.write_text(os.path.join(dest, 'nvidia.ko'), 'TESTBED-NVIDIA-MODULE version={0} flavour={1}\n'.format(
        ver, vals.get('TESTBED_FLAVOUR', 'open').strip('"')))
    gd.write_text(os.path.join('var/lib/dkms', mod, ver, kernel, 'x86_64', 'installed'), '')
    # dkms add links the tree to its source (real dkms: $dkms_tree/<module>/<version>/source -> $source_tree/...).
    link = gd.path(os.path.join('var/lib/dkms', mod, ver, 'source'))
    if not os.path.lexists(link):
        os.symlink('/usr/src/{0}'.format(src), link)
    return None


def _dkms_remove(mod, ver, kernel=None):
    """dkms remove: the builds of ``kernel``, or (``--all``, kernel None) every build and the version's tree, as
    dkms 3.x removes a module completely from the DKMS tree."""
    base = gd.path(os.path.join('var/lib/dkms', mod, ver))
    kernels = [kernel] if kernel else (os.listdir(base) if os.path.isdir(base) else [])
    for k in kernels:
        ko = gd.path(os.path.join('lib/modules', k, 'updates/dkms', 'nvidia.ko'))
        if os.path.exists(ko):
            text = gd.read_text(os.path.join('lib/modules', k, 'updates/dkms', 'nvidia.ko'), '')
            if 'version={0} '.format(ver) in text:
                os.remove(ko)
        marker = os.path.join(base, k, 'x86_64', 'installed')
        if os.path.exists(marker):
            os.remove(marker)
    if kernel is None and os.path.isdir(base):
        shutil.rmtree(base)
        for link in os.listdir(os.path.dirname(base)):
            path = os.path.join(os.path.dirname(base), link)
            if link.startswith('kernel-') and os.path.islink(path) and not os.path.exists(path):
                os.remove(path)


def cmd_dkms(args):
    """dkms shim: install/remove/autoinstall/status with real dkms's status line format."""
    if not args:
        print('Error! No action was specified.')
        return 1
    action, rest = args[0], args[1:]
    opts = {}
    pos = []
    i = 0
    while i < len(rest):
        if rest[i] in ('-m', '-v', '-k'):
            opts[rest[i]] = rest[i + 1] if i + 1 < len(rest) else ''
            i += 2
            continue
        if rest[i].startswith('--'):
            i += 1
            continue
        pos.append(rest[i])
        i += 1
    if pos and '/' in pos[0]:
        opts['-m'], opts['-v'] = pos[0].split('/', 1)
    kernels = [opts['-k']] if '-k' in opts else [gd.uname_r()]
    mods = dkms_modules()
    if action == 'status':
        # A tree whose source is gone (fault dkms-stale-tree): 3.0.x dies in the subshell that lists the modules,
        # so nothing after it is printed, the error goes to stderr, and dkms exits 0 (dkms-project/dkms#352);
        # from 3.0.13 the tree is listed as broken and the listing goes on (PR #357).
        lines = []
        for mod, ver, broken in dkms_tree_combos(mods):
            if '-m' in opts and mod != opts['-m']:
                continue
            built = _dkms_built_dirs(mod, ver)
            if broken and built and dkms_series() == '3.0':
                if lines:
                    print('\n'.join(lines))
                sys.stdout.flush()
                sys.stderr.write(_dkms_conf_error(mod, ver))
                return 0
            if broken and dkms_series() == '3.0':
                # 3.0.x: the source link is there, no build needs dkms.conf: listed as added (is_module_added).
                lines.append('{0}/{1}: added'.format(mod, ver))
                continue
            if broken:
                lines.append('{0}/{1}: broken'.format(mod, ver))
                sys.stderr.write('Error! {0}/{1}: Missing the module source directory or the symbolic link pointing '
                                 'to it.\nManual intervention is required!\n'.format(mod, ver))
                continue
            built = [k for k in built
                     if os.path.exists(gd.path(os.path.join('var/lib/dkms', mod, ver, k, 'x86_64', 'installed')))]
            if not built:
                lines.append('{0}/{1}: added'.format(mod, ver))
            for k in built:
                lines.append('{0}/{1}, {2}, x86_64: installed'.format(mod, ver, k))
        if lines:
            print('\n'.join(lines))
        return 0
    if action == 'autoinstall' and dkms_series() == '3.0':
        # 3.0.x autoinstall reads the module states first and dies in the same place (dkms-project/dkms#352: "dkms
        # autoinstall" printed the same error and exited 0): nothing is built.
        stale = [(mod, ver) for mod, ver, broken in dkms_tree_combos(mods) if broken and _dkms_built_dirs(mod, ver)]
        if stale:
            sys.stderr.write(_dkms_conf_error(*stale[0]))
            return 0
    if action in ('install', 'build', 'autoinstall'):
        rc = 0
        for mod, ver, src, vals in mods:
            if action != 'autoinstall' and (mod != opts.get('-m') or ver != opts.get('-v', ver)):
                continue
            for k in kernels:
                err = _dkms_build(mod, ver, src, vals, k)
                if isinstance(err, tuple):
                    # dkms install: exit 10; autoinstall: "failed for module(s)", exit 11 (dell/dkms dkms.in).
                    print(err[0])
                    if action == 'autoinstall':
                        print('Autoinstall on {0} failed for module(s) {1}({2}).'.format(k, mod, err[1]))
                        print('\nError! One or more modules failed to install during autoinstall.\n'
                              'Refer to previous errors for more information.')
                        rc = 11
                    else:
                        rc = err[1]
                elif err:
                    print(err)
                    rc = 1 if action != 'autoinstall' else rc
                else:
                    print('{0}/{1}: installed for {2}'.format(mod, ver, k))
        return rc
    if action == 'remove':
        for mod, ver, src, vals in mods:
            if mod == opts.get('-m') and ver == opts.get('-v', ver):
                _dkms_remove(mod, ver, opts.get('-k') if '--all' not in rest else None)
        return 0
    if action == 'add':
        return 0
    print('Error! Unknown action {0}.'.format(action))
    return 1


def cmd_mokutil(args):
    """mokutil shim: --sb-state and --test-key read the simulated EFI variables (texts of mokutil.c)."""
    if '--sb-state' in args:
        data = gd.read_efivar('SecureBoot')
        if data is None:
            print('EFI variables are not supported on this system')
            return 1
        setup = gd.read_efivar('SetupMode') or bytearray([0])
        if data[:1] == bytearray([1]) and setup[:1] == bytearray([0]):
            print('SecureBoot enabled')
        else:
            print('SecureBoot disabled')
            if setup[:1] == bytearray([1]):
                print('Platform is in Setup Mode')
        return 0
    if '--test-key' in args or '-t' in args:
        flag = '--test-key' if '--test-key' in args else '-t'
        pos = args.index(flag)
        key = args[pos + 1] if pos + 1 < len(args) else None
        if key is None:
            sys.stderr.write('mokutil: option requires an argument\n')
            return 255
        if not os.path.exists(gd.path(key.lstrip('/')) if gd.root() != '/' else key):
            sys.stderr.write('Failed to open {0}\n'.format(key))
            return 255
        # No key is ever enrolled in the simulated firmware (enrolling needs the MOK manager at the console).
        print('{0} is not enrolled'.format(key))
        return 0
    sys.stderr.write('mokutil (simulated fleet): only --sb-state and --test-key are simulated\n')
    return 255


def cmd_all_reduce_perf(args):
    """all_reduce_perf of nccl-tests (lib/perf_double.py), as the binaries the perf_tools role builds call it."""
    import perf_double
    return perf_double.cmd_all_reduce_perf(args)


def cmd_nvbandwidth(args):
    """nvbandwidth (lib/perf_double.py)."""
    import perf_double
    return perf_double.cmd_nvbandwidth(args)


def cmd_nvcc(args):
    """nvcc of the stand-in CUDA toolkit (lib/toolchain_double.py)."""
    import toolchain_double
    return toolchain_double.cmd_nvcc(args)


def cmd_cmake(args):
    """cmake stand-in (lib/toolchain_double.py)."""
    import toolchain_double
    return toolchain_double.cmd_cmake(args)


def cmd_cxx(args):
    """g++/c++ stand-in (lib/toolchain_double.py)."""
    import toolchain_double
    return toolchain_double.cmd_cxx(args)


COMMANDS = {'boot': cmd_boot, 'views': cmd_views, 'mokutil': cmd_mokutil, 'pcigen': cmd_pcigen,
            'kernel-log': cmd_kernel_log, 'modprobe': cmd_modprobe, 'dkms': cmd_dkms,
            'all_reduce_perf': cmd_all_reduce_perf, 'nvbandwidth': cmd_nvbandwidth, 'nvcc': cmd_nvcc,
            'cmake': cmd_cmake, 'c++': cmd_cxx}


def cmd_hostengine(args, version):
    """nv-hostengine of DCGM (lib/dcgmi_double.py)."""
    import dcgmi_double
    return dcgmi_double.hostengine(args)


def cmd_imex(args, version):
    """nvidia-imex (lib/imex_double.py)."""
    import imex_double
    return imex_double.daemon(args, version)


def cmd_imex_ctl(args, version):
    """nvidia-imex-ctl (lib/imex_double.py)."""
    import imex_double
    return imex_double.ctl(args, version)


DAEMONS = {'persistenced': cmd_persistenced, 'fabricmanager': cmd_fabricmanager, 'nvlsm': cmd_nvlsm,
           'hostengine': cmd_hostengine, 'imex': cmd_imex, 'imex-ctl': cmd_imex_ctl}


def main(argv):
    if not argv or argv[0] not in COMMANDS and argv[0] not in DAEMONS:
        sys.stderr.write('usage: gpu-double {0} [args]\n'.format('|'.join(sorted(list(COMMANDS) + list(DAEMONS)))))
        return 2
    try:
        if argv[0] in DAEMONS:
            version = argv[1] if len(argv) > 1 else ''
            return DAEMONS[argv[0]](argv[2:], version)
        return COMMANDS[argv[0]](argv[1:])
    except gd.DoubleError as exc:
        sys.stderr.write('gpu-double: {0}\n'.format(exc))
        return 1
