# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# Pure parser for the XML that ``nvidia-smi -q -x`` prints. It has no Ansible
# import so that the facts module, the settings module and the filter plugin all
# share it, and so that it can be tested (and benchmarked) on its own.
#
# Schemas handled: nvsmi_device_v10.dtd to v13.dtd and files without a DOCTYPE
# (drivers 418 and older), from Kepler to Blackwell. Element names that moved
# between schemas (power_readings -> gpu_power_readings, power_limit ->
# requested/current_power_limit, clocks_throttle_reasons -> clocks_event_reasons,
# single/double bit ECC counters -> sram/dram counters) are all read.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
import xml.etree.ElementTree as ET  # input is nvidia-smi output; entity declarations are refused before parsing  # nosec B405


class NvidiaSmiParseError(Exception):
    """The text is not ``nvidia-smi -q -x`` output, or a value in it is malformed."""


# Values nvidia-smi prints instead of a reading. They all mean "no value here".
_UNAVAILABLE = frozenset((
    '',
    'n/a',
    'not supported',
    'insufficient permissions',
    'requested functionality has been deprecated',
    'unknown error',
    'unknown',
    'not found',
    'not available',
    'none',
    'gpu requires reset',
    'gpu is lost',
))

DEPRECATED = 'requested functionality has been deprecated'

_NUMBER_RE = re.compile(r'^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%/()]*)\s*$')
_DOCTYPE_RE = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"nvsmi_device_v([0-9]+)\.dtd"')
_ENTITY_RE = re.compile(r'<!ENTITY', re.IGNORECASE)

_BUS_ID_RE = re.compile(r'^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$')


def _clean(text):
    """Return the stripped text of a value with surrounding brackets removed."""
    if text is None:
        return ''
    text = text.strip()
    if len(text) >= 2 and text[0] == '[' and text[-1] == ']':
        text = text[1:-1].strip()
    return text


def is_unavailable(text):
    """True when nvidia-smi printed a placeholder (``N/A``, ``[N/A]``, ``Not Supported`` ...)."""
    value = _clean(text)
    if value.lower() in _UNAVAILABLE:
        return True
    # Any other pure status word (no digit at all) is not a reading either.
    return not any(c.isdigit() for c in value)


def is_deprecated(text):
    return _clean(text).lower() == DEPRECATED


def parse_string(text):
    """A string value, or None when nvidia-smi printed a placeholder."""
    value = _clean(text)
    if value.lower() in _UNAVAILABLE:
        return None
    return value


def parse_number(text, units, where, kind=float):
    """Parse ``'700.00 W'`` style values.

    ``units`` is the tuple of accepted unit strings (``''`` for a bare number).
    ``where`` (a string, or a callable returning one) names the element in
    error messages. Returns None for placeholders; raises NvidiaSmiParseError
    for anything else that is not a number in one of the accepted units.
    """
    if text is None:
        return None
    value = _clean(text)
    if value.lower() in _UNAVAILABLE or not any(c.isdigit() for c in value):
        return None
    match = _NUMBER_RE.match(value)
    if not match or match.group(2) not in units:
        raise NvidiaSmiParseError(
            "{0}: expected a number{1}, got '{2}'".format(
                where() if callable(where) else where,
                ' in {0}'.format(' or '.join(u for u in units if u)) if any(units) else '',
                value))
    number = match.group(1)
    if kind is int:
        if '.' in number:
            return int(round(float(number)))
        return int(number)
    return float(number)


def parse_bool(text, true_words=('enabled', 'yes', 'true', 'active'),
               false_words=('disabled', 'no', 'false', 'not active')):
    value = _clean(text).lower()
    if value in true_words:
        return True
    if value in false_words:
        return False
    return None


def normalize_bus_id(bus_id):
    """``8F:00.0`` / ``0000:8f:00.0`` / ``00000000:8F:00.0`` -> ``00000000:8F:00.0``; None if not a bus id."""
    match = _BUS_ID_RE.match((bus_id or '').strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    return '{0:08X}:{1:02X}:{2:02X}.{3}'.format(int(domain or '0', 16), int(bus, 16), int(dev, 16), int(fn))


def _children(elem):
    """Map child tag -> first child element (fast lookup)."""
    result = {}
    if elem is None:
        return result
    for child in elem:
        if child.tag not in result:
            result[child.tag] = child
    return result


def _text(children, tag):
    child = children.get(tag)
    if child is None:
        return None
    return child.text


class _GpuReader(object):
    """Reads one ``<gpu>`` element."""

    def __init__(self, elem, position, include_supported_clocks):
        self.elem = elem
        self.position = position
        self.include_supported_clocks = include_supported_clocks
        self.top = _children(elem)
        self.bus_id = elem.get('id') or _text(_children(self.top.get('pci')), 'pci_bus_id')
        if not self.bus_id or not self.bus_id.strip():
            raise NvidiaSmiParseError(
                'gpu block {0}: no id attribute and no <pci>/<pci_bus_id> element'.format(position))
        self.bus_id = self.bus_id.strip()

    def where(self, path):
        return 'GPU {0} ({1}) <{2}>'.format(self.position, self.bus_id, path)

    def num(self, children, parent, tag, units, kind=float):
        return parse_number(_text(children, tag), units,
                            lambda: self.where('{0}/{1}'.format(parent, tag) if parent else tag), kind)

    def mhz(self, children, parent, tag):
        return self.num(children, parent, tag, ('MHz',), int)

    # -- sections ---------------------------------------------------------
    def pci(self):
        pci = _children(self.top.get('pci'))
        raw = parse_string(_text(pci, 'pci_device_id'))
        device_id = vendor_id = None
        if raw is not None and re.match(r'^(0x)?[0-9A-Fa-f]{8}$', raw):
            raw = raw[-8:]
            device_id = '0x{0}'.format(raw[:4].lower())
            vendor_id = '0x{0}'.format(raw[4:].lower())
        return device_id, vendor_id

    def pcie_link(self):
        """The PCIe link: generation and width, current and maximum, as nvidia-smi reads them (``<pci_gpu_link_info>``;
        ``device_*`` and ``host_max_gen`` only on drivers that print them), and the replay counter.  None without a
        ``<pci>`` section.  nvidia-smi's own help says the current generation and width may be reduced while the GPU
        is not in use (``--help-query-gpu``, ``pcie.link.gen.current``), so a lower current value alone proves no
        fault."""
        elem = self.top.get('pci')
        if elem is None:
            return None
        pci = _children(elem)
        info = _children(pci.get('pci_gpu_link_info'))
        gen = _children(info.get('pcie_gen'))
        width = _children(info.get('link_widths'))
        base = 'pci/pci_gpu_link_info/'

        def link_gen(tag):
            return self.num(gen, base + 'pcie_gen', tag, ('',), int)

        def link_width(tag):
            return self.num(width, base + 'link_widths', tag, ('x',), int)

        result = {
            'gen_current': link_gen('current_link_gen'),
            'gen_max': link_gen('max_link_gen'),
            'gen_device_current': link_gen('device_current_link_gen'),
            'gen_device_max': link_gen('max_device_link_gen'),
            'gen_host_max': link_gen('max_host_link_gen'),
            'width_current': link_width('current_link_width'),
            'width_max': link_width('max_link_width'),
            'replay_counter': self.num(pci, 'pci', 'replay_counter', ('',), int),
        }
        if all(v is None for v in result.values()):
            return None
        return result

    def event_counters(self):
        """Microseconds each clock event reason has held the clocks down since the driver loaded
        (``<clocks_event_reasons_counters>``, nvsmi_device_v13: ``sw_power_cap``, ``sync_boost``,
        ``sw_therm_slowdown``, ``hw_therm_slowdown``, ``hw_power_brake``); None where the element is absent."""
        elem = self.top.get('clocks_event_reasons_counters')
        if elem is None:
            return None
        prefix = 'clocks_event_reasons_counters_'
        children = _children(elem)
        result = {}
        for tag in children:
            name = tag[len(prefix):] if tag.startswith(prefix) else tag
            result[name] = self.num(children, 'clocks_event_reasons_counters', tag, ('us',), int)
        return result or None

    def power(self):
        if 'gpu_power_readings' in self.top:
            section, name = _children(self.top['gpu_power_readings']), 'gpu_power_readings'
            requested_tag, enforced_tag, draw_tag = 'requested_power_limit', 'current_power_limit', 'average_power_draw'
            if 'average_power_draw' not in section:
                draw_tag = 'power_draw'
        else:
            section, name = _children(self.top.get('power_readings')), 'power_readings'
            requested_tag, enforced_tag, draw_tag = 'power_limit', 'enforced_power_limit', 'power_draw'
            if 'current_power_limit' in section:
                requested_tag = 'requested_power_limit' if 'requested_power_limit' in section else 'current_power_limit'
                enforced_tag = 'current_power_limit'

        def watts(tag):
            return self.num(section, name, tag, ('W',))

        requested = watts(requested_tag)
        enforced = watts(enforced_tag)
        return {
            'power_limit_w': requested if requested is not None else enforced,
            'enforced_power_limit_w': enforced,
            'default_power_limit_w': watts('default_power_limit'),
            'min_power_limit_w': watts('min_power_limit'),
            'max_power_limit_w': watts('max_power_limit'),
            'power_draw_w': watts(draw_tag),
        }

    def clock_block(self, tag, keys):
        children = _children(self.top.get(tag))
        return dict(('{0}_mhz'.format(key), self.mhz(children, tag, '{0}_clock'.format(key))) for key in keys)

    def applications_clocks(self, tag):
        elem = self.top.get(tag)
        if elem is None:
            return None, False
        children = _children(elem)
        texts = [_text(children, 'graphics_clock'), _text(children, 'mem_clock')]
        deprecated = any(is_deprecated(t) for t in texts if t is not None) or is_deprecated(elem.text)
        value = self.clock_block(tag, ('graphics', 'mem'))
        if value['graphics_mhz'] is None and value['mem_mhz'] is None:
            return None, deprecated
        return value, deprecated

    def supported_clocks(self):
        """(table, incomplete): memory MHz (str) -> graphics MHz list; incomplete when an entry had no value."""
        elem = self.top.get('supported_clocks')
        if elem is None:
            return None, False
        result = {}
        incomplete = False
        for mem in elem.iter('supported_mem_clock'):
            mem_children = _children(mem)
            mem_mhz = self.mhz(mem_children, 'supported_clocks/supported_mem_clock', 'value')
            if mem_mhz is None:
                # A memory clock without a value: its graphics clocks cannot be paired, and the table no longer
                # bounds anything. Say so instead of dropping it silently (callers then check less, not refuse).
                incomplete = True
                continue
            graphics = result.setdefault(str(mem_mhz), [])
            where = self.where('supported_clocks/supported_mem_clock/supported_graphics_clock')
            for gr in mem.iter('supported_graphics_clock'):
                text = gr.text
                # Fast path for the thousands of plain "1965 MHz" values; anything else goes through parse_number.
                if text is not None and text.endswith(' MHz') and text[:-4].isdigit():
                    graphics.append(int(text[:-4]))
                    continue
                value = parse_number(text, ('MHz',), where, int)
                if value is not None:
                    graphics.append(value)
        return result or None, incomplete

    def ecc(self):
        mode = _children(self.top.get('ecc_mode'))
        errors = _children(self.top.get('ecc_errors'))
        return {
            'current': parse_string(_text(mode, 'current_ecc')),
            'pending': parse_string(_text(mode, 'pending_ecc')),
            'volatile_uncorrectable': self.uncorrectable(errors.get('volatile'), 'ecc_errors/volatile'),
            'aggregate_uncorrectable': self.uncorrectable(errors.get('aggregate'), 'ecc_errors/aggregate'),
        }

    def uncorrectable(self, elem, path):
        if elem is None:
            return None
        children = _children(elem)
        if 'double_bit' in children:
            # Kepler..Volta schema: <double_bit><total>
            return self.num(_children(children['double_bit']), path + '/double_bit', 'total', ('',), int)
        total = None
        for tag in ('sram_uncorrectable', 'sram_uncorrectable_parity', 'sram_uncorrectable_secded',
                    'dram_uncorrectable'):
            value = self.num(children, path, tag, ('',), int)
            if value is not None:
                total = (total or 0) + value
        return total

    def retired_pages(self):
        elem = self.top.get('retired_pages')
        if elem is None:
            return None
        children = _children(elem)

        def count(tag):
            return self.num(_children(children.get(tag)), 'retired_pages/' + tag, 'retired_count', ('',), int)

        pending_text = _text(children, 'pending_retirement')
        if pending_text is None or is_unavailable(pending_text):
            pending_text = _text(children, 'pending_blacklist')
        result = {
            'pending': parse_bool(pending_text),
            'single_bit': count('multiple_single_bit_retirement'),
            'double_bit': count('double_bit_retirement'),
        }
        if all(v is None for v in result.values()):
            return None
        return result

    def remapped_rows(self):
        elem = self.top.get('remapped_rows')
        if elem is None:
            return None
        children = _children(elem)
        result = {
            'pending': parse_bool(_text(children, 'remapped_row_pending')),
            'failure': parse_bool(_text(children, 'remapped_row_failure')),
            'correctable': self.num(children, 'remapped_rows', 'remapped_row_corr', ('',), int),
            'uncorrectable': self.num(children, 'remapped_rows', 'remapped_row_unc', ('',), int),
        }
        if all(v is None for v in result.values()):
            return None
        return result

    def fabric(self):
        elem = self.top.get('fabric')
        if elem is None:
            return None
        children = _children(elem)
        state = parse_string(_text(children, 'state'))
        status = parse_string(_text(children, 'status'))
        if state is None and status is None:
            return None
        health = _children(children.get('health'))
        return {
            'state': state,
            'status': status,
            'clique_id': parse_string(_text(children, 'cliqueId')),
            'cluster_uuid': parse_string(_text(children, 'clusterUuid')),
            'health': parse_string(_text(health, 'summary')),
        }

    def mig(self):
        mode = _children(self.top.get('mig_mode'))
        devices = []
        elem = self.top.get('mig_devices')
        if elem is not None:
            for dev in elem.iter('mig_device'):
                children = _children(dev)
                shared = _children(_children(children.get('device_attributes')).get('shared'))
                devices.append({
                    'index': self.num(children, 'mig_devices/mig_device', 'index', ('',), int),
                    'gpu_instance_id': self.num(children, 'mig_devices/mig_device', 'gpu_instance_id', ('',), int),
                    'compute_instance_id': self.num(children, 'mig_devices/mig_device', 'compute_instance_id',
                                                    ('',), int),
                    'multiprocessor_count': self.num(shared, 'mig_devices/mig_device/device_attributes/shared',
                                                     'multiprocessor_count', ('',), int),
                    'memory_total_mib': self.num(_children(children.get('fb_memory_usage')),
                                                 'mig_devices/mig_device/fb_memory_usage', 'total', ('MiB',), int),
                })
        return parse_string(_text(mode, 'current_mig')), parse_string(_text(mode, 'pending_mig')), devices

    def event_reasons(self):
        elem = self.top.get('clocks_event_reasons')
        prefix = 'clocks_event_reason_'
        if elem is None:
            elem = self.top.get('clocks_throttle_reasons')
            prefix = 'clocks_throttle_reason_'
        if elem is None:
            return None
        result = {}
        for child in elem:
            name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
            result[name] = parse_bool(child.text)
        return result

    def read(self):
        top = self.top
        device_id, vendor_id = self.pci()
        app_clocks, app_deprecated = self.applications_clocks('applications_clocks')
        default_app_clocks, default_deprecated = self.applications_clocks('default_applications_clocks')
        mig_mode, mig_pending, mig_devices = self.mig()
        supported, incomplete = self.supported_clocks() if self.include_supported_clocks else (None, False)
        temperature = _children(top.get('temperature'))
        gpu = {
            'index': self.position,
            'pci_bus_id': self.bus_id,
            'uuid': parse_string(_text(top, 'uuid')),
            'name': parse_string(_text(top, 'product_name')),
            'brand': parse_string(_text(top, 'product_brand')),
            'architecture': parse_string(_text(top, 'product_architecture')),
            'serial': parse_string(_text(top, 'serial')),
            'minor_number': self.num(top, None, 'minor_number', ('',), int),
            'vbios_version': parse_string(_text(top, 'vbios_version')),
            'persistence_mode': parse_bool(_text(top, 'persistence_mode')),
            'memory_total_mib': self.num(_children(top.get('fb_memory_usage')), 'fb_memory_usage', 'total',
                                         ('MiB',), int),
            'mig_mode': mig_mode,
            'mig_pending': mig_pending,
            'mig_devices': mig_devices,
            'compute_mode': parse_string(_text(top, 'compute_mode')),
            'performance_state': parse_string(_text(top, 'performance_state')),
            'clocks': self.clock_block('clocks', ('graphics', 'sm', 'mem', 'video')),
            'applications_clocks': app_clocks,
            'default_applications_clocks': default_app_clocks,
            'applications_clocks_deprecated': app_deprecated or default_deprecated,
            'max_clocks': self.clock_block('max_clocks', ('graphics', 'sm', 'mem')),
            'supported_clocks': supported,
            'supported_clocks_incomplete': incomplete,
            'clocks_event_reasons': self.event_reasons(),
            'clocks_event_reasons_counters_us': self.event_counters(),
            'pcie': self.pcie_link(),
            'ecc': self.ecc(),
            'retired_pages': self.retired_pages(),
            'remapped_rows': self.remapped_rows(),
            'fabric': self.fabric(),
            'pci_device_id': device_id,
            'pci_vendor_id': vendor_id,
            'temperature_c': self.num(temperature, 'temperature', 'gpu_temp', ('C',), int),
        }
        gpu.update(self.power())
        return gpu


def parse_nvsmi_xml(text, include_supported_clocks=True):
    """Parse ``nvidia-smi -q -x`` output into the ``ansible_facts.nvidia`` structure.

    Returns a dict with ``driver_version``, ``cuda_version``, ``attached_gpus``
    (as printed; it may differ from the number of ``<gpu>`` blocks), ``gpus``
    (one dict per ``<gpu>`` block in the printed order), ``gpu_blocks`` and
    ``dtd_version`` (int, or None without a DOCTYPE). ``present``/``error`` are
    not set here: they describe running the command, not its output.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as exc:
            raise NvidiaSmiParseError('nvidia-smi XML is not valid UTF-8: {0}'.format(exc))
    if text is None or not text.strip():
        raise NvidiaSmiParseError('nvidia-smi XML is empty')
    if _ENTITY_RE.search(text):
        raise NvidiaSmiParseError('nvidia-smi XML must not declare entities (<!ENTITY found)')
    try:
        root = ET.fromstring(text.strip().encode('utf-8'))  # <!ENTITY refused above, expat fetches nothing  # nosec B314
    except ET.ParseError as exc:
        raise NvidiaSmiParseError('nvidia-smi XML is not well-formed: {0}'.format(exc))
    if root.tag != 'nvidia_smi_log':
        raise NvidiaSmiParseError(
            'expected root element <nvidia_smi_log> in nvidia-smi XML, found <{0}>'.format(root.tag))
    top = _children(root)
    gpus = [_GpuReader(elem, position, include_supported_clocks).read()
            for position, elem in enumerate(root.findall('gpu'))]
    attached_text = _text(top, 'attached_gpus')
    if attached_text is None:
        attached = len(gpus)
    else:
        attached = parse_number(attached_text, ('',), '<attached_gpus>', int)
        if attached is None:
            attached = len(gpus)
    doctype = _DOCTYPE_RE.search(text[:512])
    return {
        'driver_version': parse_string(_text(top, 'driver_version')),
        'cuda_version': parse_string(_text(top, 'cuda_version')),
        'attached_gpus': attached,
        'gpu_blocks': len(gpus),
        'dtd_version': int(doctype.group(1)) if doctype else None,
        'timestamp': parse_string(_text(top, 'timestamp')),
        'gpus': gpus,
    }
